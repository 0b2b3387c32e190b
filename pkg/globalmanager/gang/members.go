package gang

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Members is what a job's pods add up to, from its templates: how many
// pods, the sum of their requests (a PodGroup's minResources) and the
// priority class they run at.
type Members struct {
	Count             int32
	Requests          corev1.ResourceList
	PriorityClassName string
}

// Add counts n pods of spec.
func (m *Members) Add(spec *corev1.PodSpec, n int32) {
	if n <= 0 {
		return
	}
	m.Count += n
	if m.PriorityClassName == "" {
		m.PriorityClassName = spec.PriorityClassName
	}
	// The pod's effective requests: init containers, sidecars and overhead
	// counted as the scheduler counts them, of the pod the API server will
	// make (a container's limits stand for its unset requests).
	reqs := resourcehelper.PodRequests(&corev1.Pod{Spec: *common.RequestsDefaulted(spec)}, resourcehelper.PodResourcesOptions{})
	if m.Requests == nil {
		m.Requests = corev1.ResourceList{}
	}
	for name, q := range reqs {
		total := m.Requests[name]
		for range n {
			total.Add(q)
		}
		m.Requests[name] = total
	}
}
