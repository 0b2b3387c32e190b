package common

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// SlimChildren is the transform of the cache of the controllers' children:
// managedFields are dropped from every object (DropManagedFields), a pod
// keeps only what is read of a child pod (SlimPod), and a ReplicaSet (a
// service's Deployment's) only its metadata, which is all the edge hub reads
// of it (WorkerChain).
func SlimChildren(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return SlimPod(o), nil
	case *appsv1.ReplicaSet:
		slim := &appsv1.ReplicaSet{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
		slim.ManagedFields = nil
		return slim, nil
	}
	return DropManagedFields(obj)
}

// SlimPod is what the GlobalManager reads of a child pod: its metadata, the
// node it runs on, whether it uses the host's network (then its IP is its
// node's, which is no identity of the pod), its host name, subdomain and
// containers' ports (where a DI-engine replica listens), its scheduler and scheduling group (which
// gang it is in), its tolerations (whether a node it is pinned to takes
// it), and its status's phase, reason, message, IP, conditions and
// containers' states. The rest, most of a worker pod's weight (containers'
// images, commands, env, mounts and resources; volumes), is never read: the
// template-hash label says which spec a pod was made from. The cache holds
// thousands of worker pods.
func SlimPod(p *corev1.Pod) *corev1.Pod {
	slim := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: p.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:        p.Spec.NodeName,
			HostNetwork:     p.Spec.HostNetwork,
			Hostname:        p.Spec.Hostname,
			Subdomain:       p.Spec.Subdomain,
			SchedulerName:   p.Spec.SchedulerName,
			SchedulingGroup: p.Spec.SchedulingGroup,
			Tolerations:     p.Spec.Tolerations,
		},
		Status: corev1.PodStatus{
			Phase:      p.Status.Phase,
			Reason:     p.Status.Reason,
			Message:    p.Status.Message,
			PodIP:      p.Status.PodIP,
			PodIPs:     p.Status.PodIPs,
			StartTime:  p.Status.StartTime,
			Conditions: p.Status.Conditions,
		},
	}
	slim.ManagedFields = nil
	for _, c := range p.Spec.Containers {
		slim.Spec.Containers = append(slim.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
	}
	for _, cs := range p.Status.ContainerStatuses {
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: cs.Name, State: cs.State, LastTerminationState: cs.LastTerminationState, Ready: cs.Ready, RestartCount: cs.RestartCount,
		})
	}
	return slim
}
