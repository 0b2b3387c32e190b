package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// quotaOf limits every name given, with scopes.
func quotaOf(scopes []corev1.ResourceQuotaScope, names ...string) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}, Scopes: scopes}}
	for _, n := range names {
		q.Spec.Hard[corev1.ResourceName(n)] = resource.MustParse("100")
	}
	return q
}

// canonical makes quantities comparable by value.
var canonical = cmp.Transformer("canonical", func(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for n, v := range l {
		out[string(n)] = v.String()
	}
	return out
})

func TestChargeCountsWhatTheAPIServerCounts(t *testing.T) {
	worker := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: list("cpu", "4")}}},
		Containers: []corev1.Container{
			// Limits only: the API server defaults requests from them.
			{Name: "a", Resources: corev1.ResourceRequirements{Limits: list("cpu", "1", "memory", "1Gi", "example.com/gpu", "1")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "hugepages-2Mi", "4Mi")}},
		},
		Overhead: list("cpu", "100m"),
	}}
	all := quotaOf(nil, "pods", "count/pods", "cpu", "requests.cpu", "limits.cpu", "requests.memory", "limits.memory",
		"requests.example.com/gpu", "requests.hugepages-2Mi", "count/services", "services", "count/deployments.apps")
	got := Charge{Pods: []*corev1.Pod{worker, worker}, Objects: [][]corev1.ResourceName{Service}}.against(all)
	want := list("pods", "2", "count/pods", "2",
		// The init container's 4 is more than the containers' 1.5; overhead on top.
		"cpu", "8200m", "requests.cpu", "8200m", "limits.cpu", "2200m",
		"requests.memory", "2Gi", "limits.memory", "2Gi", "requests.example.com/gpu", "2", "requests.hugepages-2Mi", "8Mi",
		"count/services", "1", "services", "1")
	if diff := cmp.Diff(want, got, canonical); diff != "" {
		t.Errorf("charge (-want,+got):\n%s", diff)
	}
}

func TestChargeFollowsQuotaScopes(t *testing.T) {
	bestEffort := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	burstable := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "high", ActiveDeadlineSeconds: ptr.To[int64](60),
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: list("cpu", "1")}}}}}
	c := Charge{Pods: []*corev1.Pod{bestEffort, burstable}, Objects: [][]corev1.ResourceName{Service}}
	for name, tc := range map[string]struct {
		q    *corev1.ResourceQuota
		want corev1.ResourceList
	}{
		"BestEffort counts only the best-effort pod": {quotaOf([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, "pods", "services"), list("pods", "1")},
		"NotBestEffort":  {quotaOf([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}, "pods", "requests.cpu"), list("pods", "1", "requests.cpu", "1")},
		"Terminating":    {quotaOf([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, "pods"), list("pods", "1")},
		"NotTerminating": {quotaOf([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, "pods"), list("pods", "1")},
		"PriorityClass In high": {func() *corev1.ResourceQuota {
			q := quotaOf(nil, "pods")
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
			return q
		}(), list("pods", "1")},
		"unscoped counts both and the Service": {quotaOf(nil, "pods", "services"), list("pods", "2", "services", "1")},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, c.against(tc.q), canonical); diff != "" {
				t.Errorf("charge (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLimitRangeDefaultsAreCharged(t *testing.T) {
	bare := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "bare"},
		{Name: "limited", Resources: corev1.ResourceRequirements{Limits: list("cpu", "3")}},
	}}}
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: list("cpu", "100")},
		{Type: corev1.LimitTypeContainer, Default: list("cpu", "2"), DefaultRequest: list("cpu", "1")},
	}}}
	pods := withLimitRangeDefaults([]*corev1.Pod{bare}, []*corev1.LimitRange{lr})
	got := Charge{Pods: pods}.against(quotaOf(nil, "requests.cpu", "limits.cpu"))
	// bare: request 1 (defaultRequest), limit 2 (default); limited: request
	// 3 (from its limit, as the API server defaults it first), limit 3.
	if diff := cmp.Diff(list("requests.cpu", "4", "limits.cpu", "5"), got, canonical); diff != "" {
		t.Errorf("charge (-want,+got):\n%s", diff)
	}
	if len(bare.Spec.Containers[0].Resources.Limits) != 0 {
		t.Error("the pod given was changed")
	}
}
