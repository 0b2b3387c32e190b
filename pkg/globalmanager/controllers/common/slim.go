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
// containers' ports (where a DI-engine replica listens), its scheduler and
// scheduling group (which gang it is in), and its status's phase, reason,
// message, IP, conditions and containers' states. A pod not yet bound to a
// node keeps its tolerations, node selector, required node affinity,
// overhead and containers' requests too (whether a node it is pinned to
// takes it, and which node that is: placement); once bound, its node is
// its spec.nodeName and those are never read again. The rest, most of a
// worker pod's weight (containers' images, commands, env, mounts and
// limits; volumes), is never read: the template-hash label says which spec
// a pod was made from. The cache holds thousands of worker pods.
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
	unbound := p.Spec.NodeName == ""
	for _, c := range p.Spec.Containers {
		sc := corev1.Container{Name: c.Name, Ports: c.Ports}
		if unbound {
			sc.Resources.Requests = c.Resources.Requests
		}
		slim.Spec.Containers = append(slim.Spec.Containers, sc)
	}
	if unbound {
		slim.Spec.Tolerations, slim.Spec.NodeSelector = p.Spec.Tolerations, p.Spec.NodeSelector
		slim.Spec.Affinity, slim.Spec.Overhead = requiredNodeAffinity(p.Spec.Affinity), p.Spec.Overhead
		for _, c := range p.Spec.InitContainers {
			slim.Spec.InitContainers = append(slim.Spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
				Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}})
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: cs.Name, State: cs.State, LastTerminationState: cs.LastTerminationState, Ready: cs.Ready, RestartCount: cs.RestartCount,
		})
	}
	return slim
}

// requiredNodeAffinity is what a placement reads of an affinity: its
// required node affinity alone.
func requiredNodeAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
}
