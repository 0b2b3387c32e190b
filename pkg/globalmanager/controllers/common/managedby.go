package common

import (
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// ManagedByNereid is the spec.managedBy that names Nereid's GlobalManager.
const ManagedByNereid = sednav1.ManagedByNereid

// RunByNereid says whether Nereid runs obj, of any kind: its spec.managedBy
// (ManagedByName) is absent or names Nereid's GlobalManager. An object of a
// kind without managedBy (a Dataset, a Model) is Nereid's. Every path that
// acts on an object (its controller's sync, edge reports about it, what the
// edge hub sends about it and the conditions it writes on it, the DIJob
// replicas API) asks this. An owner another controller runs (as MultiKueue
// runs a job in a worker cluster) is wholly that controller's: Begin syncs
// nothing of it (no pods, no status writes). The CRDs keep managedBy from
// changing, so an owner never moves between controllers while it runs.
func RunByNereid(obj any) bool {
	m, ok := obj.(interface{ ManagedByName() string })
	if !ok {
		return true
	}
	by := m.ManagedByName()
	return by == "" || by == ManagedByNereid
}
