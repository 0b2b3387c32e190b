package common

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// TestAllIsNotSaidWellWhileALinkIsDown: a job whose EdgeLinked condition
// is False does not say Training True / AllWorkersRunning (or Ready True):
// the condition is Unknown, naming the link; linked again, it is True.
func TestAllIsNotSaidWellWhileALinkIsDown(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "job", Generation: 2}
	down := "the link of edge node edge-0 is down since 2026-01-01T00:00:00Z"
	cases := map[string]struct {
		conds       []sednav1.JobCondition
		wantStatus  corev1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		"never missed a link": {nil, corev1.ConditionTrue, "AllWorkersRunning", "all 2 workers are running"},
		"linked again": {[]sednav1.JobCondition{{Type: links.ConditionEdgeLinked, Status: corev1.ConditionTrue, Reason: links.ReasonLinked}},
			corev1.ConditionTrue, "AllWorkersRunning", "all 2 workers are running"},
		"a link down": {[]sednav1.JobCondition{{Type: links.ConditionEdgeLinked, Status: corev1.ConditionFalse, Reason: links.ReasonLinkDown, Message: down}},
			corev1.ConditionUnknown, ReasonEdgeLinkDown, "all 2 workers are running as the cloud last heard, but " + down},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := AllWellUnlessLinkDown(owner, tc.conds, "Training", "AllWorkersRunning", "all 2 workers are running")
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message != tc.wantMessage || c.ObservedGeneration != 2 {
				t.Errorf("got %+v, want %s %s %q", c, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}
