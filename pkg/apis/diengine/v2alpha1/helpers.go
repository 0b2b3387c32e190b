package v2alpha1

import "fmt"

// TaskName is the task's name: its name, or its type when it has none.
func (t *Task) TaskName() string {
	if t.Name != "" {
		return t.Name
	}
	return string(t.Type)
}

// TaskReplicas is how many replicas task i runs: spec.replicas for a job of
// one task when set (the scale subresource writes it), else the task's own.
func (j *DIJob) TaskReplicas(i int) int32 {
	if len(j.Spec.Tasks) == 1 && j.Spec.Replicas != nil {
		return *j.Spec.Replicas
	}
	return j.Spec.Tasks[i].Replicas
}

// TotalReplicas is how many replicas the job runs, every task's together.
func (j *DIJob) TotalReplicas() int32 {
	var n int32
	for i := range j.Spec.Tasks {
		n += j.TaskReplicas(i)
	}
	return n
}

// The bounds on replicas, which the CRD enforces (its markers repeat them):
// a task runs at most MaxTaskReplicas, a job at most MaxJobReplicas, every
// task's together.
const (
	MaxTaskReplicas = 1024
	MaxJobReplicas  = 1024
)

// CheckReplicas says why the job asks for more replicas than it may, or
// nil. The CRD refuses such a job; one written under another CRD of this
// group (DI-orchestrator's has no bounds) is refused here, before anything
// is built for each of its replicas.
func (j *DIJob) CheckReplicas() error {
	var total int64
	for i := range j.Spec.Tasks {
		n := int64(j.TaskReplicas(i))
		if n > MaxTaskReplicas {
			return fmt.Errorf("task %s asks for %d replicas, more than the %d a task may run", j.Spec.Tasks[i].TaskName(), n, MaxTaskReplicas)
		}
		total += n
	}
	if total > MaxJobReplicas {
		return fmt.Errorf("the job asks for %d replicas, more than the %d a job may run", total, MaxJobReplicas)
	}
	return nil
}
