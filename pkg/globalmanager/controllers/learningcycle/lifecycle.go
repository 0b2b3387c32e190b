package learningcycle

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// lifecycle is what the lifecycle policies (common.Lifecycle) need of a
// learning-cycle job. The cycle itself runs until it fails: a job is
// finished only once it failed (a stage out of tries, or its deadline).
func (c *Controller[J]) lifecycle() *common.Lifecycle[J] {
	return &common.Lifecycle[J]{
		Spec: func(job J) common.LifecycleSpec {
			return common.SednaJobLifecycle(c.kind.Spec(job).Lifecycle)
		},
		Conditions: func(job J) common.Conditions {
			return common.SednaConditions(job, &c.kind.Fields(job).Cycle.JobConditions)
		},
		Finished: func(job J) *metav1.Time {
			f := c.kind.Fields(job)
			if f.Cycle.State != sednav1.StageFailed {
				return nil
			}
			if *f.CompletionTime != nil {
				return *f.CompletionTime
			}
			return &metav1.Time{} // when is not known

		},
		Started: func(job J) *metav1.Time { return *c.kind.Fields(job).StartTime },
		Fail: func(job J, reason, msg string, now metav1.Time) {
			c.changeCycle(job, now, func(m *machine) { m.failJob(reason, msg) })
		},
		Suspended: func(job J, pods []*corev1.Pod, now metav1.Time) {
			c.changeCycle(job, now, func(m *machine) {
				m.st.Active, m.st.Succeeded, m.st.Failed = countPods(pods)
				m.st.ObservedGeneration = job.GetGeneration()
			})
		},
	}
}

// suspended says whether the job's spec.suspend holds its pods stopped.
func suspended(spec Spec) bool {
	return spec.Lifecycle != nil && common.SednaJobLifecycle(spec.Lifecycle).Suspend
}

// changeCycle changes job's cycle status with a machine at now.
func (c *Controller[J]) changeCycle(job J, now metav1.Time, change func(m *machine)) {
	fields := c.kind.Fields(job)
	st := fields.read()
	change(&machine{job: job.GetName(), st: &st, now: now, config: &c.config})
	fields.write(st)
}

// failJob fails the job, its current round too, for reason: the cycle
// stops where it is, and its pods go as when a stage runs out of tries.
func (m *machine) failJob(reason, msg string) {
	if m.st.Round == 0 {
		m.start()
	}
	m.endRound(sednav1.RoundFailed, msg)
	m.st.State = sednav1.StageFailed
	m.st.CompletionTime = m.stamp()
	m.condition(m.st.Stage, sednav1.StageFailed, reason, msg)
}
