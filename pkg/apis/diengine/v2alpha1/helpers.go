package v2alpha1

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
