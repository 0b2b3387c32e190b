package dijob

import (
	"strings"
	"testing"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// TestAJobOverTheReplicaBoundsBuildsNothing: the CRD refuses such a job, but
// one written under DI-orchestrator's own CRD (no bounds) reaches the
// controller; it must build nothing for it (2^31 replicas would exhaust the
// GlobalManager's memory) and say why.
func TestAJobOverTheReplicaBoundsBuildsNothing(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Tasks[1].Replicas = div2.MaxJobReplicas // with the others, over the job's bound
	f := newFixture(t, job)
	created, deleted := f.sync(t, job)
	if len(created) != 0 || len(deleted) != 0 {
		t.Fatalf("created %v and deleted %v, want nothing", names(created), deleted)
	}
	st := f.status(t, job)
	if st.Phase != div2.JobPending || st.Replicas != 0 || len(st.Allocation) != 0 {
		t.Errorf("phase %s, replicas %d, allocation of %d, want Pending, 0 and none", st.Phase, st.Replicas, len(st.Allocation))
	}
	var reason, message string
	for _, c := range st.Conditions {
		if c.Type == div2.ConditionType(div2.JobPending) {
			reason, message = c.Reason, c.Message
		}
	}
	if reason != "TooManyReplicas" || !strings.Contains(message, "more than the 1024 a job may run") {
		t.Errorf("Pending condition %s: %q, want TooManyReplicas naming the bound", reason, message)
	}
}
