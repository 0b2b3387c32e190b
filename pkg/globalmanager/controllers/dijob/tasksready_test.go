package dijob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStatusSaysEachTasksReadyReplicas: status.tasksReady, the TASKS-READY
// column, counts the running and ready pods of each task against its
// replicas, in the spec's order, and is written by the sync that counts
// them.
func TestStatusSaysEachTasksReadyReplicas(t *testing.T) {
	job := exampleJob(t)
	created, _ := newFixture(t, job).sync(t, job)
	if len(created) != 4 {
		t.Fatalf("the first sync made %d pods, want the example's 4", len(created))
	}
	running := withPhase(created, corev1.PodRunning)
	notReady := running[2].DeepCopy() // the second collector
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	cases := map[string]struct {
		pods []*corev1.Pod
		want string
	}{
		"no pod yet":                  {nil, "learner 0/1, collector 0/2, evaluator 0/1"},
		"pods pending":                {withPhase(created, corev1.PodPending), "learner 0/1, collector 0/2, evaluator 0/1"},
		"every pod running and ready": {running, "learner 1/1, collector 2/2, evaluator 1/1"},
		"a collector running, not ready": {
			[]*corev1.Pod{running[0], running[1], notReady, running[3]}, "learner 1/1, collector 1/2, evaluator 1/1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, job, tc.pods...)
			f.sync(t, job)
			if got := f.status(t, job).TasksReady; got != tc.want {
				t.Errorf("status.tasksReady %q, want %q", got, tc.want)
			}
		})
	}
}
