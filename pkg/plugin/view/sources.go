package view

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// source is how one kind of the GlobalManager's table is read: its list
// through the typed client, and what a Job shows of each object beyond what
// the table's Progress says (the kind's phase, round and metrics).
type source struct {
	list  func(ctx context.Context, c nereidclient.Interface, namespace string) ([]any, error)
	facts func(obj any) facts
}

// facts are what a Job shows of one object that its kind's Progress does
// not say.
type facts struct {
	meta       metav1.Object
	conditions []Condition
	// progress is the kind's progress in a few words; phase the phase of a
	// kind whose Progress has none (a service); ownPhase, when set, the
	// phase as the object's own API version names it, over Progress's (a
	// v1alpha1 DIJob's, stored as v2alpha1).
	progress, phase, ownPhase string
	// finished: the job is over and waits for nothing.
	finished bool
	// cycle is set for the learning cycles.
	cycle *cycle
	// replicas: the job's pods are counted per task (a DIJob); tasks are
	// its task names in spec order.
	replicas bool
	tasks    []string
}

// cycle is what a learning cycle's status says of its rounds and stages.
type cycle struct {
	status     *sednav1.CycleStatus
	stages     []sednav1.StageCondition
	completion *metav1.Time
}

// sources are the kinds view knows how to show, by group and kind; a kind
// of the table with a Progress and no source is a Note (and a failing unit
// test).
var sources = map[schema.GroupKind]source{
	sednav1.FederatedLearningJobKind.GroupKind():   {list: listFederated, facts: federatedFacts},
	sednav1.IncrementalLearningJobKind.GroupKind(): {list: listIncremental, facts: incrementalFacts},
	sednav1.LifelongLearningJobKind.GroupKind():    {list: listLifelong, facts: lifelongFacts},
	sednav1.JointInferenceServiceKind.GroupKind():  {list: listJointInference, facts: jointInferenceFacts},
	div2.DIJobKind.GroupKind():                     {list: listDIJobs, facts: dijobFacts},
}

// pointers are pointers to each of items, as the kinds' Progress takes them.
func pointers[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func listFederated(ctx context.Context, c nereidclient.Interface, ns string) ([]any, error) {
	l, err := c.SednaV1alpha1().FederatedLearningJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return pointers(l.Items), nil
}

func listIncremental(ctx context.Context, c nereidclient.Interface, ns string) ([]any, error) {
	l, err := c.SednaV1alpha1().IncrementalLearningJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return pointers(l.Items), nil
}

func listLifelong(ctx context.Context, c nereidclient.Interface, ns string) ([]any, error) {
	l, err := c.SednaV1alpha1().LifelongLearningJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return pointers(l.Items), nil
}

func listJointInference(ctx context.Context, c nereidclient.Interface, ns string) ([]any, error) {
	l, err := c.SednaV1alpha1().JointInferenceServices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return pointers(l.Items), nil
}

// listDIJobs lists v2alpha1 DIJobs: v1alpha1 ones are stored as v2alpha1 and
// served converted.
func listDIJobs(ctx context.Context, c nereidclient.Interface, ns string) ([]any, error) {
	l, err := c.DiengineV2alpha1().DIJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return pointers(l.Items), nil
}

// federatedFacts: the round of the fastest and the slowest node, as the
// ROUND and SLOWEST printer columns.
func federatedFacts(obj any) facts {
	j := obj.(*sednav1.FederatedLearningJob)
	st := &j.Status
	f := facts{meta: j, conditions: jobConditions(st.Conditions),
		finished: st.Phase == sednav1.FLJobSucceeded || st.Phase == sednav1.FLJobFailed}
	switch {
	case st.Round > 0 && st.SlowestRound < st.Round:
		f.progress = fmt.Sprintf("round %d (slowest %d)", st.Round, st.SlowestRound)
	case st.Round > 0:
		f.progress = fmt.Sprintf("round %d", st.Round)
	}
	return f
}

func incrementalFacts(obj any) facts {
	j := obj.(*sednav1.IncrementalLearningJob)
	return cycleFacts(j, &j.Status.CycleStatus, j.Status.Conditions, j.Status.CompletionTime)
}

func lifelongFacts(obj any) facts {
	j := obj.(*sednav1.LifelongLearningJob)
	return cycleFacts(j, &j.Status.CycleStatus, j.Status.Conditions, j.Status.CompletionTime)
}

// cycleFacts: the round and the round deployed (the DEPLOYED column); a
// cycle is over only when it failed.
func cycleFacts(meta metav1.Object, st *sednav1.CycleStatus, stages []sednav1.StageCondition, completion *metav1.Time) facts {
	f := facts{meta: meta, conditions: jobConditions(st.JobConditions), finished: st.State == sednav1.StageFailed,
		cycle: &cycle{status: st, stages: stages, completion: completion}}
	if st.Round > 0 {
		f.progress = fmt.Sprintf("round %d (deployed %d)", st.Round, st.DeployedRound)
	}
	return f
}

// jointInferenceFacts: the EDGE-READY and CLOUD-READY columns; a service's
// phase is its Failed or Ready condition.
func jointInferenceFacts(obj any) facts {
	s := obj.(*sednav1.JointInferenceService)
	f := facts{meta: s, conditions: jobConditions(s.Status.Conditions)}
	if s.Status.EdgeReady != "" || s.Status.CloudReady != "" {
		f.progress = fmt.Sprintf("edge %s, cloud %s", orDash(s.Status.EdgeReady), orDash(s.Status.CloudReady))
	}
	for _, c := range f.conditions {
		switch {
		case c.Type == "Failed" && c.Status == "True":
			f.phase = "Failed"
			return f
		case c.Type == "Ready" && c.Status == "True":
			f.phase = "Available"
		case c.Type == "Ready":
			f.phase = "Unavailable"
		}
	}
	return f
}

// dijobFacts: status.tasksReady, the tasks' ready replicas. A v1alpha1
// job's phase and conditions read as v1alpha1 (DI-orchestrator v0.2) names
// them, Created where v2alpha1 says Starting; its conditions v1alpha1 has
// not (Admitted, which says what it waits for) stay.
func dijobFacts(obj any) facts {
	j := obj.(*div2.DIJob)
	v1 := conversion.IsV1(j)
	f := facts{meta: j, progress: j.Status.TasksReady, replicas: true,
		finished: j.Status.Phase == div2.JobSucceeded || j.Status.Phase == div2.JobFailed}
	if v1 && j.Status.Phase != "" {
		f.ownPhase = string(conversion.V1Phase(j.Status.Phase))
	}
	for _, c := range j.Status.Conditions {
		typ := string(c.Type)
		if t, ok := conversion.V1ConditionType(c.Type); v1 && ok {
			typ = string(t)
		}
		f.conditions = append(f.conditions, Condition{Type: typ, Status: string(c.Status),
			Reason: c.Reason, Message: c.Message, Since: timeOf(c.LastTransitionTime)})
	}
	for i := range j.Spec.Tasks {
		f.tasks = append(f.tasks, j.Spec.Tasks[i].TaskName())
	}
	return f
}

func jobConditions(in []sednav1.JobCondition) []Condition {
	var out []Condition
	for _, c := range in {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			Since: timeOf(c.LastTransitionTime)})
	}
	return out
}

// timeOf is t, nil when it is unset.
func timeOf(t metav1.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
