package dijob

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// The reasons of a v1 job's conditions and events, DI-orchestrator v0.2's.
const (
	reasonV1Created   = "DIJobCreated"
	reasonV1Running   = "DIJobRunning"
	reasonV1Succeeded = "DIJobSucceeded"
	reasonV1Failed    = "DIJobFailed"
)

// The container status reasons that end a di-container in a pod still
// running (another container of it runs on): Completed counts as
// succeeded, any other as failed.
const containerCompleted = "Completed"

// countReplicas is status.replicaStatus of a v1 job's pods, as
// DI-orchestrator's updateReplicaStatus counted it: every replica type at
// zero, then per pod of a type (DDP learners are counted under none) that
// is not being deleted nor deleted by this sync: a Running pod as active
// unless its di-container has terminated (then succeeded if Completed,
// else failed), a Failed pod as failed, a Succeeded pod as succeeded.
func countReplicas(pods []*corev1.Pod, deleted map[string]bool) map[div1.ReplicaType]*div1.ReplicaStatus {
	out := map[div1.ReplicaType]*div1.ReplicaStatus{
		div1.ReplicaTypeCoordinator: {}, div1.ReplicaTypeCollector: {}, div1.ReplicaTypeLearner: {}, div1.ReplicaTypeAggregator: {},
	}
	for _, p := range pods {
		r := out[coordinated.StatusType(p)]
		if r == nil || common.PodTerminating(p) || deleted[p.Name] {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			switch reason, ended := diContainerEnd(p); {
			case !ended:
				r.Active++
			case reason == containerCompleted:
				r.Succeeded++
			default:
				r.Failed++
			}
		case corev1.PodFailed:
			r.Failed++
		case corev1.PodSucceeded:
			r.Succeeded++
		}
	}
	return out
}

// setV1Progress fills, in a v1 job's v2 status, what the default view
// (kubectl get dijob, which reads v2alpha1; the plugin and its dashboard)
// shows of a job's progress: replicas, its pods not ended (DDP learners
// too); readyReplicas, those running and ready; tasksReady, those of each
// replica type ("coordinator 1/1, collector 2/2, learner 1/1", a type
// shown once it has a pod). v1alpha1 shows replicaStatus instead.
func setV1Progress(status *div2.DIJobStatus, pods []*corev1.Pod, deleted map[string]bool) {
	types := []string{coordinated.Coordinator, coordinated.Collector, coordinated.Learner, coordinated.Aggregator, coordinated.DDPLearner}
	asked, ready := map[string]int32{}, map[string]int32{}
	status.Replicas, status.ReadyReplicas = 0, 0
	for _, p := range pods {
		typ := coordinated.TypeOf(p)
		if !slices.Contains(types, typ) || common.PodTerminating(p) || deleted[p.Name] ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		asked[typ]++
		status.Replicas++
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready[typ]++
			status.ReadyReplicas++
		}
	}
	var parts []string
	for _, typ := range types {
		if asked[typ] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", typ, ready[typ], asked[typ]))
		}
	}
	status.TasksReady = strings.Join(parts, ", ")
}

// diContainerEnd is the reason the pod's di-container terminated, when it
// did.
func diContainerEnd(p *corev1.Pod) (string, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == coordinated.ContainerName && cs.State.Terminated != nil {
			return cs.State.Terminated.Reason, true
		}
	}
	return "", false
}

// advance moves the phase of an unfinished v1 job by its coordinator, as
// DI-orchestrator did: Created once the coordinator's pod exists
// (coordinatorExists), Running while it runs, Failed or Succeeded when it
// fails or succeeds. At Succeeded every type's active pods count as
// succeeded.
func (sc *v1SyncCtx) advance(coordinatorExists bool) {
	name := sc.v1.Name
	if sc.status.Phase == "" && coordinatorExists {
		sc.setPhase(div1.JobCreated, reasonV1Created, fmt.Sprintf("DIJob %s created", name))
	}
	coordinator := sc.status.ReplicaStatus[div1.ReplicaTypeCoordinator]
	switch {
	case coordinator.Active > 0:
		sc.setPhase(div1.JobRunning, reasonV1Running, fmt.Sprintf("coordinator and aggregator of DIJob %s are running", name))
	case coordinator.Failed > 0:
		sc.setPhase(div1.JobFailed, reasonV1Failed, fmt.Sprintf("DIJob %s failed because coordinator failed", name))
	case coordinator.Succeeded > 0:
		sc.setPhase(div1.JobSucceeded, reasonV1Succeeded, fmt.Sprintf("DIJob %s succeeded because coordinator succeeded", name))
		for _, r := range sc.status.ReplicaStatus {
			r.Succeeded += r.Active
			r.Active = 0
		}
	}
}

// setPhase sets a v1 job's phase and its condition, as DI-orchestrator's
// updateJobPhase did: the phase's condition True with reason and message
// (unchanged when it says so already; its transition time kept while its
// status is), and at Succeeded or Failed the Running condition False. The
// event of a new phase (none for Running; Failed a Warning) goes to
// sc.events.
func (sc *v1SyncCtx) setPhase(phase div1.Phase, reason, message string) {
	old := sc.status.Phase
	sc.status.Phase = phase
	if v1Finished(phase) {
		for i := range sc.status.Conditions {
			c := &sc.status.Conditions[i]
			if c.Type == div1.JobRunning && c.Status != corev1.ConditionFalse {
				c.Status, c.LastTransitionTime, c.LastUpdateTime = corev1.ConditionFalse, sc.now, sc.now
			}
		}
	}
	setV1Condition(sc.status, div1.DIJobCondition{
		Type: phase, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastUpdateTime: sc.now, LastTransitionTime: sc.now,
	})
	if old == phase || phase == div1.JobRunning {
		return
	}
	eventType := corev1.EventTypeNormal
	if phase == div1.JobFailed {
		eventType = corev1.EventTypeWarning
	}
	sc.events = append(sc.events, common.Event{Type: eventType, Reason: reason, Message: message})
}

// setReplicasCreated sets the condition ReplicasCreated of a v1 job:
// False (FailedCreate, why) when the sync could not make a pod, True
// (SuccessfulCreate) when it made pods after one had failed to be made; a
// job none of whose pods ever failed to be made has none. The v1 replicas
// server sets it too, for the collectors and learners it makes.
func (sc *v1SyncCtx) setReplicasCreated() {
	c := div1.DIJobCondition{Type: div1.ConditionReplicasCreated, LastUpdateTime: sc.now, LastTransitionTime: sc.now}
	switch {
	case sc.failedCreate != "":
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, common.ReasonFailedCreate, sc.failedCreate
	case len(sc.made) > 0 && slices.ContainsFunc(sc.status.Conditions, func(c div1.DIJobCondition) bool {
		return c.Type == div1.ConditionReplicasCreated && c.Status != corev1.ConditionTrue
	}):
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, common.ReasonSuccessfulCreate, "pods made again"
	default:
		return
	}
	setV1Condition(sc.status, c)
}

// setV1Condition puts c in place of the condition of its type (DI's
// setCondition): not at all when that one has c's status and reason, and
// keeping its transition time when it has c's status.
func setV1Condition(status *div1.DIJobStatus, c div1.DIJobCondition) {
	for i, cur := range status.Conditions {
		if cur.Type != c.Type {
			continue
		}
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		status.Conditions = append(status.Conditions[:i:i], status.Conditions[i+1:]...)
		break
	}
	status.Conditions = append(status.Conditions, c)
}
