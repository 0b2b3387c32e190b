package coordinated

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// ResourceGPU is the GPU resource DI-orchestrator asks for.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Resources are what a coordinator asks for each replica (DI's
// ResourceQuantity, without the count).
type Resources struct {
	CPU, GPU, Memory resource.Quantity
}

// SetResources sets r, where not zero, as both the request and the limit
// of pod's di-container, as DI-orchestrator's SetPodResources did.
func SetResources(pod *corev1.Pod, r Resources) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != ContainerName {
			continue
		}
		for name, q := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: r.CPU, corev1.ResourceMemory: r.Memory, ResourceGPU: r.GPU} {
			if q.IsZero() {
				continue
			}
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Limits[name], c.Resources.Requests[name] = q.DeepCopy(), q.DeepCopy()
		}
	}
}

// GPUSlot is one DDP learner pod's share of a learner's GPUs: GPUs on
// Node, as allocator.GPUPlacer places them.
type GPUSlot = allocator.GPUSlot
