package dijob

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

const v1ServerURL = "http://di-v1-server:8080"

// v1Template is a v1 replica's template: its di-container names no port.
func v1Template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: coordinated.ContainerName, Image: image}}}}
}

// v1Job is a v1alpha1 job of a coordinator, a collector and a learner, as
// the API server stores it (v2alpha1), with status as its v1 status.
func v1Job(t *testing.T, name string, policy div1.CleanPodPolicy, status div1.DIJobStatus) *div2.DIJob {
	t.Helper()
	v1 := &div1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "v1-job-uid", Generation: 1},
		Spec: div1.DIJobSpec{
			CleanPodPolicy: policy,
			Coordinator:    &div1.CoordinatorSpec{Template: v1Template("coordinator")},
			Collector:      &div1.CollectorSpec{Template: v1Template("collector")},
			Learner:        &div1.LearnerSpec{Template: v1Template("learner")},
		},
		Status: status,
	}
	job, err := conversion.ToV2(v1)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// v1Pod is a pod of job's replica type in phase, as the operator (the
// coordinator) or the v1 replicas server (the others) makes it.
func v1Pod(t *testing.T, job *div2.DIJob, replicaType, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	v1, err := conversion.ToV1(job)
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := coordinated.Pod(coordinated.Replica{Job: v1, Type: replicaType, Name: name, Template: &v1.Spec.Coordinator.Template})
	pod.UID, pod.Status.Phase = types.UID("uid-"+name), phase
	return pod
}

// v1Fixture is a fixture of job whose controller has a V1ServerURL, and
// whose API server and caches hold pods and services.
func v1Fixture(t *testing.T, job *div2.DIJob, pods []*corev1.Pod, services ...*corev1.Service) *fixture {
	t.Helper()
	f := newFixture(t, job)
	f.c.config.V1ServerURL = v1ServerURL
	// The API server holds the pods whole, the cache as the informers'
	// transform leaves them.
	for _, p := range pods {
		if _, err := f.kube.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.c.syncer.Pods.Add(common.SlimPod(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range services {
		if _, err := f.kube.CoreV1().Services(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.c.syncer.Services.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// v1Status is the job's v1 status as the API server has it.
func (f *fixture) v1Status(t *testing.T, job *div2.DIJob) div1.DIJobStatus {
	t.Helper()
	s := f.status(t, job)
	return conversion.V1StatusOf(&s)
}

// events drains the events the controller recorded.
func (f *fixture) events() []string {
	var out []string
	ch := f.c.syncer.Recorder.(*record.FakeRecorder).Events
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// services are the names of the Services the sync created and deleted.
func (f *fixture) services() (created, deleted []string) {
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource != "services" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.CreateAction:
			created = append(created, a.GetObject().(*corev1.Service).Name)
		case clienttesting.DeleteAction:
			deleted = append(deleted, a.GetName())
		}
	}
	slices.Sort(created)
	slices.Sort(deleted)
	return created, deleted
}

func hasEvent(events []string, eventType, reason string, names ...string) bool {
	for _, e := range events {
		if !strings.HasPrefix(e, eventType+" "+reason+" ") {
			continue
		}
		if !slices.ContainsFunc(names, func(n string) bool { return !strings.Contains(e, n) }) {
			return true
		}
	}
	return false
}

// TestV1JobGetsItsCoordinatorAsDIOrchestratorMadeIt: a new v1 job gets its
// coordinator pod with DI-orchestrator v0.2's name, labels, port and
// environment, kept off edge nodes, and its Service; the job is Created.
// The v2 controller's pods and headless Service are not made.
func TestV1JobGetsItsCoordinatorAsDIOrchestratorMadeIt(t *testing.T) {
	job := v1Job(t, "cartpole", "", div1.DIJobStatus{})
	f := v1Fixture(t, job, nil)
	created, _ := f.sync(t, job)
	if len(created) != 1 {
		t.Fatalf("created %v, want the coordinator alone", names(created))
	}
	p := created[0]
	if p.Name != "cartpole-coordinator" {
		t.Errorf("coordinator pod %s, want cartpole-coordinator", p.Name)
	}
	wantLabels := map[string]string{"dijob-name": "cartpole", "replica-type": "coordinator", "group-name": "diengine.opendilab.org",
		"controller-name": "di-operator", "pod-name": "cartpole-coordinator"}
	for k, v := range wantLabels {
		if p.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, p.Labels[k], v)
		}
	}
	if port, ok := coordinated.PortOf(p); !ok || port != 22273 {
		t.Errorf("di-port %d (%v), want 22273", port, ok)
	}
	wantEnv := map[string]string{"KUBERNETES_POD_NAMESPACE": ns, "KUBERNETES_POD_NAME": "cartpole-coordinator",
		"KUBERNETES_COORDINATOR_URL": "cartpole-coordinator." + ns + ":22273", "KUBERNETES_SERVER_URL": v1ServerURL, "COORDINATOR_PORT": "22273"}
	for k, v := range wantEnv {
		if got := env(p, k); got != v {
			t.Errorf("env %s=%q, want %q", k, got, v)
		}
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != job.UID || ref.Kind != "DIJob" {
		t.Errorf("controller reference %v, want the job", ref)
	}
	if a := p.Spec.Affinity; a == nil || a.NodeAffinity == nil || !strings.Contains(a.NodeAffinity.String(), allocator.EdgeNodeLabel) {
		t.Errorf("the coordinator may run on an edge node: affinity %v", p.Spec.Affinity)
	}
	if svcs, _ := f.services(); !slices.Equal(svcs, []string{"cartpole-coordinator"}) {
		t.Errorf("Services created %v, want the coordinator's alone", svcs)
	}
	if got := f.v1Status(t, job); got.Phase != div1.JobCreated {
		t.Errorf("phase %q, want Created", got.Phase)
	}
	if events := f.events(); !hasEvent(events, corev1.EventTypeNormal, reasonV1Created, "cartpole") {
		t.Errorf("events %q, want DIJobCreated", events)
	}
}

// TestV1JobPhasesFollowTheCoordinator: the job's phase, conditions, events
// and replicaStatus follow its coordinator's pod, as DI-orchestrator's.
func TestV1JobPhasesFollowTheCoordinator(t *testing.T) {
	created := div1.DIJobStatus{Phase: div1.JobCreated, Conditions: []div1.DIJobCondition{{Type: div1.JobCreated, Status: corev1.ConditionTrue, Reason: reasonV1Created}}}
	running := div1.DIJobStatus{Phase: div1.JobRunning, Conditions: append(slices.Clone(created.Conditions),
		div1.DIJobCondition{Type: div1.JobRunning, Status: corev1.ConditionTrue, Reason: reasonV1Running})}
	errored := corev1.ContainerStatus{Name: coordinated.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}
	for name, tc := range map[string]struct {
		from       div1.DIJobStatus
		phase      corev1.PodPhase
		containers []corev1.ContainerStatus
		want       div1.Phase
		wantConds  map[div1.Phase]corev1.ConditionStatus
		wantEvent  string // type and reason
		wantCoord  div1.ReplicaStatus
		wantCollec div1.ReplicaStatus
	}{
		"pending: Created": {from: created, phase: corev1.PodPending, want: div1.JobCreated,
			wantConds: map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True"}, wantCollec: div1.ReplicaStatus{Active: 1}},
		"running: Running, no event": {from: created, phase: corev1.PodRunning, want: div1.JobRunning,
			wantConds: map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True", div1.JobRunning: "True"},
			wantCoord: div1.ReplicaStatus{Active: 1}, wantCollec: div1.ReplicaStatus{Active: 1}},
		"succeeded: Succeeded, the active counted as succeeded": {from: running, phase: corev1.PodSucceeded, want: div1.JobSucceeded,
			wantConds: map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True", div1.JobRunning: "False", div1.JobSucceeded: "True"},
			wantEvent: "Normal " + reasonV1Succeeded, wantCoord: div1.ReplicaStatus{Succeeded: 1}, wantCollec: div1.ReplicaStatus{Succeeded: 1}},
		"failed: Failed": {from: running, phase: corev1.PodFailed, want: div1.JobFailed,
			wantConds: map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True", div1.JobRunning: "False", div1.JobFailed: "True"},
			wantEvent: "Warning " + reasonV1Failed, wantCoord: div1.ReplicaStatus{Failed: 1}, wantCollec: div1.ReplicaStatus{Active: 1}},
		"running, its di-container ended in error: Failed": {from: running, phase: corev1.PodRunning, containers: []corev1.ContainerStatus{errored}, want: div1.JobFailed,
			wantConds: map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True", div1.JobRunning: "False", div1.JobFailed: "True"},
			wantEvent: "Warning " + reasonV1Failed, wantCoord: div1.ReplicaStatus{Failed: 1}, wantCollec: div1.ReplicaStatus{Active: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			job := v1Job(t, "cartpole", "", tc.from)
			coordinator := v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", tc.phase)
			coordinator.Status.ContainerStatuses = tc.containers
			collector := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodRunning)
			f := v1Fixture(t, job, []*corev1.Pod{coordinator, collector})
			if created, deleted := f.sync(t, job); len(created)+len(deleted) > 0 {
				t.Errorf("created %v, deleted %v; want neither", names(created), deleted)
			}
			got := f.v1Status(t, job)
			conds := map[div1.Phase]corev1.ConditionStatus{}
			for _, c := range got.Conditions {
				conds[c.Type] = c.Status
			}
			if got.Phase != tc.want || !cmp.Equal(conds, tc.wantConds) {
				t.Errorf("phase %s, conditions %v; want %s, %v", got.Phase, conds, tc.want, tc.wantConds)
			}
			if diff := cmp.Diff(map[div1.ReplicaType]div1.ReplicaStatus{
				div1.ReplicaTypeCoordinator: tc.wantCoord, div1.ReplicaTypeCollector: tc.wantCollec, div1.ReplicaTypeLearner: {}, div1.ReplicaTypeAggregator: {},
			}, values(got.ReplicaStatus)); diff != "" {
				t.Errorf("replicaStatus (-want,+got):\n%s", diff)
			}
			events := f.events()
			if tc.wantEvent != "" && !hasEvent(events, strings.Fields(tc.wantEvent)[0], strings.Fields(tc.wantEvent)[1], "cartpole") {
				t.Errorf("events %q, want %s", events, tc.wantEvent)
			}
			if tc.wantEvent == "" && slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, " DIJob") }) {
				t.Errorf("events %q, want no phase event", events)
			}
		})
	}
}

func values(m map[div1.ReplicaType]*div1.ReplicaStatus) map[div1.ReplicaType]div1.ReplicaStatus {
	out := map[div1.ReplicaType]div1.ReplicaStatus{}
	for k, v := range m {
		out[k] = *v
	}
	return out
}

// TestV1JobReplacesAFailedCollectorAndKeepsItsPhase: a failed collector is
// made again under a new name of its prefix and the failed pod deleted,
// with an event naming both; the job stays Running. A collector whose
// replica spent its replacements is left Failed, marked, and said so.
func TestV1JobReplacesAFailedCollectorAndKeepsItsPhase(t *testing.T) {
	running := div1.DIJobStatus{Phase: div1.JobRunning, Conditions: []div1.DIJobCondition{{Type: div1.JobRunning, Status: corev1.ConditionTrue, Reason: reasonV1Running}}}
	job := v1Job(t, "cartpole", "", running)
	coordinator := v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodRunning)
	failed := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodFailed)
	spent := v1Pod(t, job, coordinated.Collector, "cartpole-collector-fghij", corev1.PodFailed)
	spent.Annotations = map[string]string{AnnotationReplacement: "3", AnnotationReplacementWindow: f0Time().Format("2006-01-02T15:04:05Z07:00")}
	f := v1Fixture(t, job, []*corev1.Pod{coordinator, failed, spent})
	created, deleted := f.sync(t, job)
	if len(created) != 1 || !strings.HasPrefix(created[0].Name, "cartpole-collector-") || created[0].Name == failed.Name {
		t.Fatalf("created %v, want one new cartpole-collector-xxxxx", names(created))
	}
	made := created[0]
	if env(made, coordinated.EnvPodName) != made.Name || made.Labels[coordinated.LabelPodName] != made.Name || made.Annotations[AnnotationReplacement] != "1" {
		t.Errorf("replacement %s: KUBERNETES_POD_NAME %q, pod-name %q, %s %q", made.Name, env(made, coordinated.EnvPodName),
			made.Labels[coordinated.LabelPodName], AnnotationReplacement, made.Annotations[AnnotationReplacement])
	}
	// The cache holds pods without their env: the replacement is made from
	// the pod as the API server has it (KUBERNETES_POD_NAME above), its image
	// the collectors' template's.
	if made.Spec.Containers[0].Image != "collector" {
		t.Errorf("replacement's image %q, want the collector template's", made.Spec.Containers[0].Image)
	}
	if !slices.Equal(deleted, []string{failed.Name}) {
		t.Errorf("deleted %v, want %s alone", deleted, failed.Name)
	}
	if got := f.v1Status(t, job); got.Phase != div1.JobRunning {
		t.Errorf("phase %s, want Running still", got.Phase)
	}
	events := f.events()
	if !hasEvent(events, corev1.EventTypeNormal, reasonReplicaReplaced, failed.Name, made.Name) {
		t.Errorf("events %q, want %s naming %s and %s", events, reasonReplicaReplaced, failed.Name, made.Name)
	}
	if !hasEvent(events, corev1.EventTypeWarning, reasonReplacementSpent, spent.Name) {
		t.Errorf("events %q, want %s naming %s", events, reasonReplacementSpent, spent.Name)
	}
	if p, err := f.kube.CoreV1().Pods(ns).Get(t.Context(), spent.Name, metav1.GetOptions{}); err != nil || p.Annotations[AnnotationReplacementsSpent] != "3" {
		t.Errorf("the spent collector is not marked %s: %v", AnnotationReplacementsSpent, err)
	}
}

// f0Time is the fixtures' clock, newFixture's.
// TestV1JobReplacementIsMadeFromTheTemplate: a failed collector that
// someone who may create or update pods, not the job, made privileged, on
// the host's network, tolerating the control plane's taint, of another
// image and owner, is replaced by the collector template's pod. A failed
// aggregator is left to the coordinator's replicas/failed.
func TestV1JobReplacementIsMadeFromTheTemplate(t *testing.T) {
	running := div1.DIJobStatus{Phase: div1.JobRunning}
	job := v1Job(t, "cartpole", "", running)
	failed := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodFailed)
	failed.Spec.Containers[0].Image = "attacker"
	failed.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(bool)}
	failed.Spec.HostNetwork = true
	failed.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
	failed.OwnerReferences = append(failed.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"})
	aggregator := v1Pod(t, job, coordinated.Aggregator, "cartpole-aggregator-fghij", corev1.PodFailed)
	f := v1Fixture(t, job, []*corev1.Pod{v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodRunning), failed, aggregator})
	created, _ := f.sync(t, job)
	if len(created) != 1 || coordinated.TypeOf(created[0]) != coordinated.Collector {
		t.Fatalf("created %v, want one collector", names(created))
	}
	made := created[0]
	if c := made.Spec.Containers[0]; c.Image != "collector" || c.SecurityContext != nil || made.Spec.HostNetwork || len(made.Spec.Tolerations) != 0 || len(made.OwnerReferences) != 1 {
		t.Errorf("replacement: image %q, security context %v, hostNetwork %t, tolerations %v, owners %v; want the template's pod, the job its owner",
			c.Image, c.SecurityContext, made.Spec.HostNetwork, made.Spec.Tolerations, made.OwnerReferences)
	}
}

func f0Time() metav1.Time { return metav1.Unix(1000, 0).Rfc3339Copy() }

// TestV1JobCleansUpPerPolicyAtTheEnd: a finished job's pods go per
// cleanPodPolicy, the coordinator's never; every Service goes.
func TestV1JobCleansUpPerPolicyAtTheEnd(t *testing.T) {
	for policy, want := range map[div1.CleanPodPolicy][]string{
		div1.CleanPodPolicyRunning: {"cartpole-collector-running"},
		div1.CleanPodPolicyAll:     {"cartpole-collector-running", "cartpole-learner-done"},
		div1.CleanPodPolicyNone:    nil,
	} {
		t.Run(string(policy), func(t *testing.T) {
			job := v1Job(t, "cartpole", policy, div1.DIJobStatus{Phase: div1.JobSucceeded})
			pods := []*corev1.Pod{
				v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodSucceeded),
				v1Pod(t, job, coordinated.Collector, "cartpole-collector-running", corev1.PodRunning),
				v1Pod(t, job, coordinated.Learner, "cartpole-learner-done", corev1.PodSucceeded),
			}
			var services []*corev1.Service
			for _, p := range pods {
				svc := coordinated.Service(p)
				svc.UID = types.UID("svc-" + p.Name)
				services = append(services, svc)
			}
			f := v1Fixture(t, job, pods, services...)
			created, deleted := f.sync(t, job)
			if len(created) > 0 || !slices.Equal(deleted, want) {
				t.Errorf("created %v, deleted %v; want nothing created and %v deleted", names(created), deleted, want)
			}
			if _, svcs := f.services(); !slices.Equal(svcs, []string{"cartpole-collector-running", "cartpole-coordinator", "cartpole-learner-done"}) {
				t.Errorf("Services deleted %v, want all three", svcs)
			}
		})
	}
}

// TestV1JobKeepsAServicePerPod: a pod the v1 server made gets its Service;
// a Service whose pod is gone is deleted.
func TestV1JobKeepsAServicePerPod(t *testing.T) {
	job := v1Job(t, "cartpole", "", div1.DIJobStatus{Phase: div1.JobRunning})
	coordinator := v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodRunning)
	learner := v1Pod(t, job, coordinated.Learner, "cartpole-learner-abcde", corev1.PodRunning)
	gone := coordinated.Service(v1Pod(t, job, coordinated.Collector, "cartpole-collector-gone1", corev1.PodRunning))
	gone.UID = "svc-gone"
	f := v1Fixture(t, job, []*corev1.Pod{coordinator, learner}, coordinated.Service(coordinator), gone)
	f.sync(t, job)
	created, deleted := f.services()
	if !slices.Equal(created, []string{learner.Name}) || !slices.Equal(deleted, []string{gone.Name}) {
		t.Errorf("Services created %v, deleted %v; want %s created, %s deleted", created, deleted, learner.Name, gone.Name)
	}
}

// TestV1JobWithATooLongNameFails: a job whose pods' Services could not be
// named fails at once, naming metadata.name and the bound, and makes
// nothing.
func TestV1JobWithATooLongNameFails(t *testing.T) {
	name := strings.Repeat("j", coordinated.MaxJobNameLength+1)
	job := v1Job(t, name, "", div1.DIJobStatus{})
	f := v1Fixture(t, job, nil)
	if created, _ := f.sync(t, job); len(created) > 0 {
		t.Fatalf("created %v for a job whose name is too long", names(created))
	}
	got := f.v1Status(t, job)
	if got.Phase != div1.JobFailed || len(got.Conditions) != 1 || !strings.Contains(got.Conditions[0].Message, "metadata.name") {
		t.Fatalf("status %+v, want Failed with a condition naming metadata.name", got)
	}
	bound := strings.Fields(strings.ReplaceAll(got.Conditions[0].Message, ":", " "))
	if !slices.Contains(bound, "45") || coordinated.MaxJobNameLength != 45 {
		t.Errorf("condition %q does not name the bound %d", got.Conditions[0].Message, coordinated.MaxJobNameLength)
	}
	if events := f.events(); !hasEvent(events, corev1.EventTypeWarning, reasonInvalidV1Job, "metadata.name") {
		t.Errorf("events %q, want a Warning naming metadata.name", events)
	}
}

// TestV1JobsAreNotTheV2Controllers: the v2 controller's pods, headless
// Service and status fields (selector, allocation, replicas of its tasks)
// are not made for a v1 job; the same job unmarked gets them.
func TestV1JobsAreNotTheV2Controllers(t *testing.T) {
	for name, tc := range map[string]struct {
		v1       bool
		wantPods []string
	}{
		"a v1alpha1 job": {v1: true, wantPods: []string{"cartpole-dqn-coordinator"}},
		"a v2alpha1 job": {wantPods: []string{"cartpole-dqn-learner-0", "cartpole-dqn-collector-0", "cartpole-dqn-collector-1", "cartpole-dqn-evaluator-0"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			if tc.v1 {
				job.Annotations = map[string]string{conversion.AnnotationV1: "{}"}
				job.Spec.Tasks = append([]div2.Task{{Type: div2.TaskTypeNone, Name: conversion.CoordinatorTask, Replicas: 1, Template: v1Template("c")}}, job.Spec.Tasks...)
			}
			f := newFixture(t, job)
			created, _ := f.sync(t, job)
			if got := names(created); !slices.Equal(got, tc.wantPods) {
				t.Fatalf("pods created %v, want %v", got, tc.wantPods)
			}
			svcs, _ := f.services()
			if got := slices.Contains(svcs, ServiceName(job.Name)); got == tc.v1 {
				t.Errorf("headless Service made: %v, want %v", got, !tc.v1)
			}
			// Its replicas are its pods' (setV1Progress), not its tasks'.
			if got := f.status(t, job); tc.v1 && (got.Selector != "" || got.Replicas != 1 || got.Allocation != nil) {
				t.Errorf("the v1 job's status has the v2 controller's fields: %+v", got)
			}
		})
	}
}

// TestV1ReplacementsAreBoundedPerReplicaAndPerSync: a replica is replaced
// at most backoffLimit times within replacementWindow, a new window
// starting once it passed; one sync replaces at most
// maxReplacementsPerSync pods.
func TestV1ReplacementsAreBoundedPerReplicaAndPerSync(t *testing.T) {
	now := f0Time().Time
	at := func(d time.Duration, n string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			AnnotationReplacement: n, AnnotationReplacementWindow: now.Add(-d).UTC().Format(time.RFC3339),
		}}}
	}
	for name, tc := range map[string]struct {
		old    *corev1.Pod
		limit  int32
		wantN  int32
		wantOK bool
	}{
		"a first failure":                 {old: &corev1.Pod{}, limit: 3, wantN: 1, wantOK: true},
		"the third replacement":           {old: at(time.Minute, "2"), limit: 3, wantN: 3, wantOK: true},
		"a fourth within the window":      {old: at(time.Minute, "3"), limit: 3, wantN: 4},
		"a fourth once the window passed": {old: at(replacementWindow, "3"), limit: 3, wantN: 1, wantOK: true},
		"backoffLimit 0: never":           {old: &corev1.Pod{}, limit: 0, wantN: 1},
	} {
		t.Run(name, func(t *testing.T) {
			n, _, ok := replacementOf(tc.old, now, tc.limit)
			if n != tc.wantN || ok != tc.wantOK {
				t.Errorf("replacement %d (%v), want %d (%v)", n, ok, tc.wantN, tc.wantOK)
			}
		})
	}

	job := v1Job(t, "cartpole", "", div1.DIJobStatus{Phase: div1.JobRunning})
	pods := []*corev1.Pod{v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodRunning)}
	for i := range maxReplacementsPerSync + 2 {
		pods = append(pods, v1Pod(t, job, coordinated.Collector, fmt.Sprintf("cartpole-collector-%05d", i), corev1.PodFailed))
	}
	f := v1Fixture(t, job, pods)
	created, deleted := f.sync(t, job)
	if len(created) != maxReplacementsPerSync || len(deleted) != maxReplacementsPerSync {
		t.Errorf("one sync replaced %d and deleted %d of %d failed pods, want %d", len(created), len(deleted), len(pods)-1, maxReplacementsPerSync)
	}
}

// v1Running is the status of a v1 job whose coordinator runs.
func v1Running() div1.DIJobStatus {
	return div1.DIJobStatus{Phase: div1.JobRunning, Conditions: []div1.DIJobCondition{
		{Type: div1.JobCreated, Status: corev1.ConditionTrue, Reason: reasonV1Created},
		{Type: div1.JobRunning, Status: corev1.ConditionTrue, Reason: reasonV1Running},
	}}
}

// v1Coordinator is job's coordinator, running on cloud-0.
func v1Coordinator(t *testing.T, job *div2.DIJob) *corev1.Pod {
	t.Helper()
	coordinator := v1Pod(t, job, coordinated.Coordinator, "cartpole-coordinator", corev1.PodRunning)
	coordinator.Spec.NodeName = "cloud-0"
	return coordinator
}

// TestV1JobSaysWhichEdgeLinksAreDownAndWhenTheyReturn: a running v1 job
// whose collector is on an edge node whose link is down has v2's EdgeLinked
// condition, False with LinkDown naming the node, and a Warning; v1alpha1
// shows it, and the phase stays Running. Back, it is True (Linked) with a
// Normal event.
func TestV1JobSaysWhichEdgeLinksAreDownAndWhenTheyReturn(t *testing.T) {
	running := v1Running()
	job := v1Job(t, "cartpole", "", running)
	coordinator := v1Coordinator(t, job)
	collector := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodRunning)
	collector.Spec.NodeName = "edge-0"
	pods := []*corev1.Pod{coordinator, collector}
	down := time.Unix(900, 0)

	f := v1Fixture(t, job, pods)
	f.c.config.Links = downLinks{"edge-0": down}
	f.sync(t, job)
	st := f.status(t, job)
	want := wantLinkDown(t, st, "edge-0", down)
	v1 := conversion.V1StatusOf(&st)
	if v1.Phase != div1.JobRunning {
		t.Errorf("v1 phase %s with a link down, want Running", v1.Phase)
	}
	if !slices.ContainsFunc(v1.Conditions, func(c div1.DIJobCondition) bool {
		return c.Type == div1.ConditionEdgeLinked && c.Status == corev1.ConditionFalse && c.Reason == links.ReasonLinkDown
	}) {
		t.Errorf("v1 conditions %+v, want EdgeLinked False %s", v1.Conditions, links.ReasonLinkDown)
	}
	if ev := f.events(); !hasEvent(ev, corev1.EventTypeWarning, links.ReasonLinkDown, want) {
		t.Errorf("events %q, want a Warning LinkDown naming the node", ev)
	}

	job.Status = st
	f = v1Fixture(t, job, pods)
	f.c.config.Links = downLinks{}
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionEdgeLinked); c == nil || c.Status != corev1.ConditionTrue || c.Reason != links.ReasonLinked {
		t.Errorf("EdgeLinked %+v once the link is back, want True %s", c, links.ReasonLinked)
	}
	if ev := f.events(); !hasEvent(ev, corev1.EventTypeNormal, links.ReasonLinked) {
		t.Errorf("events %q, want a Normal Linked", ev)
	}

	// A v1 job that never missed a link has no such condition.
	job = v1Job(t, "cartpole", "", running)
	f = v1Fixture(t, job, pods)
	f.c.config.Links = downLinks{}
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionEdgeLinked); c != nil {
		t.Errorf("EdgeLinked %+v on a job that never missed a link, want none", c)
	}
}

// TestV1JobSaysWhichPodCannotBePlaced: a v1 job whose collector the
// scheduler cannot place says Scheduled=False Unschedulable naming the pod
// and what the scheduler said, in v1alpha1 too, with one Warning; once it
// is placed, Scheduled=True Placed. A job never refused has no condition.
func TestV1JobSaysWhichPodCannotBePlaced(t *testing.T) {
	running := v1Running()
	job := v1Job(t, "cartpole", "", running)
	coordinator := v1Coordinator(t, job)
	collector := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodPending)
	const says = "0/3 nodes are available: 3 Insufficient cpu."
	collector.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: says}}

	f := v1Fixture(t, job, []*corev1.Pod{coordinator, collector})
	f.sync(t, job)
	st := f.status(t, job)
	want := "pod cartpole-collector-abcde cannot be placed; the scheduler says: " + says
	if c := findCondition(st, div2.ConditionScheduled); c == nil || c.Status != corev1.ConditionFalse || c.Reason != placement.ReasonUnschedulable || c.Message != want {
		t.Fatalf("Scheduled %+v, want False %s %q", c, placement.ReasonUnschedulable, want)
	}
	if v1 := conversion.V1StatusOf(&st); v1.Phase != div1.JobRunning || !slices.ContainsFunc(v1.Conditions, func(c div1.DIJobCondition) bool {
		return c.Type == div1.ConditionScheduled && c.Status == corev1.ConditionFalse && c.Reason == placement.ReasonUnschedulable
	}) {
		t.Errorf("v1 status %+v, want Running with Scheduled False %s", v1, placement.ReasonUnschedulable)
	}
	if ev := f.events(); !hasEvent(ev, corev1.EventTypeWarning, placement.ReasonUnschedulable, "cartpole-collector-abcde") {
		t.Errorf("events %q, want a Warning Unschedulable naming the pod", ev)
	}

	// Placed: True, and no second warning.
	job.Status = st
	placed := collector.DeepCopy()
	placed.Spec.NodeName, placed.Status.Phase, placed.Status.Conditions = "edge-0", corev1.PodRunning, nil
	f = v1Fixture(t, job, []*corev1.Pod{coordinator, placed})
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionScheduled); c == nil || c.Status != corev1.ConditionTrue || c.Reason != gang.ReasonPlaced {
		t.Errorf("Scheduled %+v once placed, want True %s", c, gang.ReasonPlaced)
	}
	if ev := f.events(); hasEvent(ev, corev1.EventTypeWarning, placement.ReasonUnschedulable) {
		t.Errorf("events %q once placed, want no Warning", ev)
	}

	// Never refused: no condition.
	job = v1Job(t, "cartpole", "", running)
	f = v1Fixture(t, job, []*corev1.Pod{coordinator, placed})
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionScheduled); c != nil {
		t.Errorf("Scheduled %+v on a job never refused a place, want none", c)
	}
}

// TestV1JobSaysWhenItsCoordinatorCannotBeMade: the API server refuses the
// coordinator's pod; the sync fails (to be retried) and the job says why:
// ReplicasCreated False FailedCreate naming the template and the API
// server's words, in v1alpha1 too, with a Warning FailedCreate. Once the
// coordinator is made, ReplicasCreated True.
func TestV1JobSaysWhenItsCoordinatorCannotBeMade(t *testing.T) {
	job := v1Job(t, "cartpole", "", div1.DIJobStatus{})
	f := v1Fixture(t, job, nil)
	const says = "spec.containers[0].image: Required value"
	f.kube.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "cartpole-coordinator", field.ErrorList{field.Required(field.NewPath("spec", "containers").Index(0).Child("image"), "")})
	})
	if err := f.c.sync(t.Context(), ns+"/"+job.Name); err == nil {
		t.Fatal("sync succeeded though the coordinator was refused")
	}
	st := f.status(t, job)
	c := findCondition(st, div2.ConditionReplicasCreated)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != common.ReasonFailedCreate ||
		!strings.Contains(c.Message, "spec.coordinator.template") || !strings.Contains(c.Message, says) {
		t.Fatalf("ReplicasCreated %+v, want False %s naming the template and %q", c, common.ReasonFailedCreate, says)
	}
	if v1 := conversion.V1StatusOf(&st); !slices.ContainsFunc(v1.Conditions, func(c div1.DIJobCondition) bool {
		return c.Type == div1.ConditionReplicasCreated && c.Status == corev1.ConditionFalse
	}) {
		t.Errorf("v1 conditions %+v, want ReplicasCreated False", v1.Conditions)
	}
	if ev := f.events(); !hasEvent(ev, corev1.EventTypeWarning, common.ReasonFailedCreate, "cartpole-coordinator", says) {
		t.Errorf("events %q, want a Warning FailedCreate saying why", ev)
	}

	job.Status = st
	f = v1Fixture(t, job, nil)
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionReplicasCreated); c == nil || c.Status != corev1.ConditionTrue || c.Reason != common.ReasonSuccessfulCreate {
		t.Errorf("ReplicasCreated %+v once the coordinator is made, want True %s", c, common.ReasonSuccessfulCreate)
	}
}

// TestV1JobShowsItsProgressInTheDefaultView: kubectl get dijob, the plugin
// and its dashboard read v2alpha1's replicas, readyReplicas and tasksReady;
// a v1 job fills them from its pods (a coordinator and two collectors
// running and ready, a learner pending, a collector ended): 4 replicas, 3
// ready, "coordinator 1/1, collector 2/2, learner 0/1".
func TestV1JobShowsItsProgressInTheDefaultView(t *testing.T) {
	job := v1Job(t, "cartpole", "", v1Running())
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	coordinator := v1Coordinator(t, job)
	coordinator.Status.Conditions = ready
	var pods []*corev1.Pod
	for _, name := range []string{"cartpole-collector-a", "cartpole-collector-b"} {
		p := v1Pod(t, job, coordinated.Collector, name, corev1.PodRunning)
		p.Status.Conditions = ready
		pods = append(pods, p)
	}
	pods = append(pods, coordinator,
		v1Pod(t, job, coordinated.Learner, "cartpole-learner-a", corev1.PodPending),
		v1Pod(t, job, coordinated.Collector, "cartpole-collector-c", corev1.PodSucceeded))
	f := v1Fixture(t, job, pods)
	f.sync(t, job)
	st := f.status(t, job)
	got := fmt.Sprintf("%d %d %q", st.Replicas, st.ReadyReplicas, st.TasksReady)
	if want := fmt.Sprintf("%d %d %q", 4, 3, "coordinator 1/1, collector 2/2, learner 0/1"); got != want {
		t.Errorf("replicas, readyReplicas, tasksReady = %s, want %s", got, want)
	}
}

// TestV1JobWhoseCoordinatorIsGoneStartsAfresh: a running v1 job whose
// coordinator pod is gone (deleted by hand) gets a new coordinator, and the
// replicas the gone one asked for that still run are deleted with one event
// saying why; ended ones are kept, and the job stays Running.
func TestV1JobWhoseCoordinatorIsGoneStartsAfresh(t *testing.T) {
	job := v1Job(t, "cartpole", "", v1Running())
	collector := v1Pod(t, job, coordinated.Collector, "cartpole-collector-abcde", corev1.PodRunning)
	learner := v1Pod(t, job, coordinated.Learner, "cartpole-learner-abcde", corev1.PodPending)
	ended := v1Pod(t, job, coordinated.Collector, "cartpole-collector-fghij", corev1.PodSucceeded)
	f := v1Fixture(t, job, []*corev1.Pod{collector, learner, ended})
	created, deleted := f.sync(t, job)
	if len(created) != 1 || created[0].Name != coordinated.CoordinatorName(job.Name) {
		t.Fatalf("created %v, want the coordinator alone", names(created))
	}
	if want := []string{collector.Name, learner.Name}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if got := f.v1Status(t, job); got.Phase != div1.JobRunning {
		t.Errorf("phase %s, want Running still", got.Phase)
	}
	if events := f.events(); !hasEvent(events, corev1.EventTypeNormal, common.ReasonSuccessfulDelete, collector.Name, learner.Name, "coordinator that asked for them is gone") {
		t.Errorf("events %q, want %s naming %s and %s and why", events, common.ReasonSuccessfulDelete, collector.Name, learner.Name)
	}
}

// TestV1JobSuspendedAndResumedKeepsOneConditionPerType: a running v1 job
// suspended loses its coordinator and says Suspended, its v1 phase kept;
// resumed, it makes its coordinator again. Its conditions stay one per type
// in both versions (status.conditions is a map list: the API server
// refuses two of a type).
func TestV1JobSuspendedAndResumedKeepsOneConditionPerType(t *testing.T) {
	job := v1Job(t, "cartpole", "", v1Running())
	job.Spec.Suspend = ptr.To(true)
	f := v1Fixture(t, job, []*corev1.Pod{v1Coordinator(t, job)})
	if created, deleted := f.sync(t, job); len(created) != 0 || !slices.Equal(deleted, []string{"cartpole-coordinator"}) {
		t.Fatalf("suspending: created %v, deleted %v; want the coordinator deleted alone", names(created), deleted)
	}
	suspended := f.status(t, job)
	checkOnePerType(t, "suspended", suspended)
	if v1 := conversion.V1StatusOf(&suspended); v1.Phase != div1.JobRunning || !v1HasCondition(v1, div1.ConditionSuspended, corev1.ConditionTrue) {
		t.Errorf("suspended, v1alpha1 shows %+v; want Running still and Suspended True", v1)
	}

	resumed := job.DeepCopy()
	resumed.Spec.Suspend = ptr.To(false)
	resumed.Status = suspended
	f = v1Fixture(t, resumed, nil)
	if created, _ := f.sync(t, resumed); len(created) != 1 || created[0].Name != "cartpole-coordinator" {
		t.Fatalf("resuming: created %v, want the coordinator", names(created))
	}
	after := f.status(t, resumed)
	checkOnePerType(t, "resumed", after)
	if v1 := conversion.V1StatusOf(&after); !v1HasCondition(v1, div1.ConditionSuspended, corev1.ConditionFalse) {
		t.Errorf("resumed, v1alpha1 shows %+v; want Suspended False", v1)
	}
}

func checkOnePerType(t *testing.T, when string, st div2.DIJobStatus) {
	t.Helper()
	seen := map[div2.ConditionType]bool{}
	for _, c := range st.Conditions {
		if seen[c.Type] {
			t.Errorf("%s: two conditions of type %s: %+v", when, c.Type, st.Conditions)
		}
		seen[c.Type] = true
	}
}

func v1HasCondition(st div1.DIJobStatus, typ div1.Phase, status corev1.ConditionStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status == status
		}
	}
	return false
}

// TestV1JobPastItsDeadlineFailsAndItsCoordinatorGoes: a v1 job failed by
// its activeDeadlineSeconds, not by its coordinator's end, does not leave
// its coordinator running.
func TestV1JobPastItsDeadlineFailsAndItsCoordinatorGoes(t *testing.T) {
	job := v1Job(t, "cartpole", "", v1Running())
	job.CreationTimestamp = metav1.Unix(0, 0)
	job.Spec.ActiveDeadlineSeconds = ptr.To[int64](10) // the fixture's clock is at 1000 s
	f := v1Fixture(t, job, []*corev1.Pod{v1Coordinator(t, job)})
	f.sync(t, job)
	v1 := f.v1Status(t, job)
	if v1.Phase != div1.JobFailed || !v1HasCondition(v1, div1.JobFailed, corev1.ConditionTrue) {
		t.Fatalf("v1 status %+v, want Failed", v1)
	}
	failedJob := job.DeepCopy()
	failedJob.Status = f.status(t, job)
	checkOnePerType(t, "failed", failedJob.Status)
	f = v1Fixture(t, failedJob, []*corev1.Pod{v1Coordinator(t, failedJob)})
	if _, deleted := f.sync(t, failedJob); !slices.Contains(deleted, "cartpole-coordinator") {
		t.Errorf("deleted %v after the deadline, want the running coordinator", deleted)
	}
}
