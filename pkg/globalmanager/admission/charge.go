package admission

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Object counts a request may name besides its pods, as a ResourceQuota
// names them: the legacy name and the count/ one.
var (
	// Service is one Service (a ClusterIP or headless one).
	Service = []corev1.ResourceName{corev1.ResourceServices, "count/services"}
	// Deployment is one Deployment of apps/v1.
	Deployment = []corev1.ResourceName{"count/deployments.apps"}
)

// Charge is what a request costs every quota that selects it: the
// resources its pods ask for, and its objects counted.
type Charge struct {
	// Pods are the pods to be created, as they will be sent (scheduling
	// fields decorated). Only their specs are read.
	Pods []*corev1.Pod
	// Objects are the other objects to be created, each as the quota
	// resource names that count it (Service, Deployment).
	Objects [][]corev1.ResourceName
}

// against is what c costs quota q, for each resource q limits: a pod q's
// scopes do not select costs it nothing; objects other than pods are not
// charged to a quota with scopes (the API server counts them only in
// unscoped quotas).
func (c Charge) against(q *corev1.ResourceQuota) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(name corev1.ResourceName, v resource.Quantity) {
		if _, limited := q.Spec.Hard[name]; !limited {
			return
		}
		total := out[name]
		total.Add(v)
		out[name] = total
	}
	for _, pod := range c.Pods {
		if !selects(q, pod) {
			continue
		}
		for name, v := range podUsage(pod) {
			add(name, v)
		}
	}
	if !scoped(q) {
		for _, names := range c.Objects {
			for _, name := range names {
				add(name, *resource.NewQuantity(1, resource.DecimalSI))
			}
		}
	}
	return out
}

// podUsage is what one pod counts against a quota, by the names a quota
// gives it, as the API server's pod evaluator counts: the pod itself, its
// effective requests (a container's limits stand for its unset requests,
// as the API server defaults them) and its limits.
func podUsage(pod *corev1.Pod) corev1.ResourceList {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{corev1.ResourcePods: one, "count/pods": one}
	p := &corev1.Pod{Spec: *common.RequestsDefaulted(&pod.Spec)}
	for name, v := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		switch {
		case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
			out[name] = v
			out[corev1.ResourceName("requests."+string(name))] = v
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			out[corev1.ResourceName("requests."+string(name))] = v
		case strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/"):
			// An extended resource: only its requests can be limited.
			out[corev1.ResourceName("requests."+string(name))] = v
		}
	}
	for name, v := range resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{}) {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
			out[corev1.ResourceName("limits."+string(name))] = v
		}
	}
	return out
}

// scoped says whether q counts only some pods.
func scoped(q *corev1.ResourceQuota) bool {
	return len(q.Spec.Scopes) > 0 || (q.Spec.ScopeSelector != nil && len(q.Spec.ScopeSelector.MatchExpressions) > 0)
}

// selects says whether quota q counts pod: every scope it names matches.
// A BestEffort quota counts only the number of pods.
func selects(q *corev1.ResourceQuota, pod *corev1.Pod) bool {
	for _, s := range q.Spec.Scopes {
		if !scopeMatches(corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}, pod) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, r := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(r, pod) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(r corev1.ScopedResourceSelectorRequirement, pod *corev1.Pod) bool {
	switch r.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
	case corev1.ResourceQuotaScopeNotTerminating:
		return pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds < 0
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod)
	case corev1.ResourceQuotaScopePriorityClass:
		name := pod.Spec.PriorityClassName
		switch r.Operator {
		case corev1.ScopeSelectorOpExists:
			return name != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return name == ""
		case corev1.ScopeSelectorOpIn:
			return slices.Contains(r.Values, name)
		case corev1.ScopeSelectorOpNotIn:
			return !slices.Contains(r.Values, name)
		}
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod)
	}
	// A scope of other objects (a volume attributes class) selects no pod.
	return false
}

// bestEffort says whether the pod sets no request or limit of cpu or memory.
func bestEffort(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				if _, ok := l[corev1.ResourceCPU]; ok {
					return false
				}
				if _, ok := l[corev1.ResourceMemory]; ok {
					return false
				}
			}
		}
	}
	return true
}

// crossNamespaceAffinity says whether a pod (anti-)affinity term of the pod
// names other namespaces.
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// withLimitRangeDefaults are copies of pods with the defaults of the
// LimitRanges of their namespace, as the API server's LimitRanger sets
// them before the quota is charged: a container's unset limits from a
// Container item's default, its unset requests from its defaultRequest.
func withLimitRangeDefaults(pods []*corev1.Pod, ranges []*corev1.LimitRange) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		c := &corev1.Pod{Spec: *common.RequestsDefaulted(&p.Spec)}
		for _, r := range ranges {
			for _, item := range r.Spec.Limits {
				if item.Type != corev1.LimitTypeContainer {
					continue
				}
				for _, cs := range [][]corev1.Container{c.Spec.InitContainers, c.Spec.Containers} {
					for j := range cs {
						setUnset(&cs[j].Resources.Limits, item.Default)
						setUnset(&cs[j].Resources.Requests, item.DefaultRequest)
					}
				}
			}
		}
		out[i] = c
	}
	return out
}

// setUnset sets in *l each of defaults that *l has not.
func setUnset(l *corev1.ResourceList, defaults corev1.ResourceList) {
	for name, v := range defaults {
		if _, set := (*l)[name]; set {
			continue
		}
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[name] = v.DeepCopy()
	}
}
