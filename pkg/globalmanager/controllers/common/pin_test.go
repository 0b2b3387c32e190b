package common

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestPinnedNodeIsTheNodePinRequires(t *testing.T) {
	zone := func(value string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
	}
	own := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{zone("a"), zone("b")},
	}}}
	before := own.DeepCopy()
	pinned := Pin(own, "n2")
	if diff := cmp.Diff(before, own); diff != "" {
		t.Errorf("Pin changed the affinity it was given (-before,+after):\n%s", diff)
	}
	for i, term := range pinned.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if diff := cmp.Diff(before.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i].MatchExpressions, term.MatchExpressions); diff != "" {
			t.Errorf("Pin changed the template's term %d (-want,+got):\n%s", i, diff)
		}
	}
	tests := map[string]struct {
		pod  corev1.PodSpec
		want string
	}{
		"pinned without an affinity of its own": {pod: corev1.PodSpec{Affinity: Pin(nil, "n1")}, want: "n1"},
		"pinned with terms of its own":          {pod: corev1.PodSpec{Affinity: pinned}, want: "n2"},
		"bound":                                 {pod: corev1.PodSpec{NodeName: "n3", Affinity: pinned}, want: "n3"},
		"no affinity":                           {want: ""},
		"terms naming two nodes":                {pod: corev1.PodSpec{Affinity: withTerms(Pin(nil, "n1"), Pin(nil, "n2"))}, want: ""},
		"a term naming no node":                 {pod: corev1.PodSpec{Affinity: withTerms(Pin(nil, "n1"), before)}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := PinnedNode(&corev1.Pod{Spec: tc.pod}); got != tc.want {
				t.Errorf("PinnedNode = %q, want %q", got, tc.want)
			}
		})
	}
}

// withTerms returns a with the required terms of b added.
func withTerms(a, b *corev1.Affinity) *corev1.Affinity {
	required := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	required.NodeSelectorTerms = append(required.NodeSelectorTerms, b.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms...)
	return a
}
