package common

import (
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// ManagedByNereid is the spec.managedBy that names Nereid's GlobalManager.
const ManagedByNereid = sednav1.ManagedByNereid

// Manages says whether Nereid runs owner: its spec.managedBy is absent or
// names Nereid's GlobalManager. An owner another controller runs (as
// MultiKueue runs a job in a worker cluster) is wholly that controller's:
// Begin syncs nothing of it (no pods, no status writes) and its edge
// reports are refused. The CRDs keep managedBy from changing, so an owner
// never moves between controllers while it runs.
func (p *Syncer[T]) Manages(owner T) bool {
	if p.Lifecycle == nil {
		return true
	}
	by := p.Lifecycle.Spec(owner).ManagedBy
	return by == "" || by == ManagedByNereid
}
