package learningcycle

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// MaxConditions bounds status.conditions. A round's transitions are a dozen
// at most with retries; the bound keeps any pathological sequence from
// growing the object.
const MaxConditions = 20

// Events the cycle records.
const (
	ReasonStarted          = "Started"
	ReasonStageStarting    = "StageStarting"
	ReasonStageRetry       = "StageRetry"
	ReasonJobFailed        = "JobFailed"
	ReasonRoundDeployed    = "RoundDeployed"
	ReasonRoundNotDeployed = "RoundNotDeployed"
	ReasonRoundFailed      = "RoundFailed"
	ReasonMissingReference = "MissingReference"
)

// reasonEndedWithoutReport is the stage condition of a stage pod that ended
// Succeeded before its worker's report came.
const reasonEndedWithoutReport = "PodEndedWithoutReport"

// StagePodName is the pod of one try of a train or eval stage, as
// demo-train-1-1: a try's pod is new, and a repeated create of it fails.
func StagePodName(job string, stage sednav1.Stage, round, attempt int32) string {
	return common.ChildName(job, strings.ToLower(string(stage)), fmt.Sprint(round), fmt.Sprint(attempt))
}

// InferenceWorkerName is the inference worker serving the model of round
// (0: the initial model).
func InferenceWorkerName(job string, round int32) string {
	return common.ChildName(job, "deploy", fmt.Sprint(round))
}

// RoundDir is where a round's stage writes its output: <outputDir>/round-<R>/<role>.
func RoundDir(outputDir string, round int32, role Role) string {
	return fmt.Sprintf("%s/round-%d/%s", strings.TrimRight(outputDir, "/"), round, role)
}

// roleOf is the role of a stage's worker pods; the deploy stage has none.
func roleOf(s sednav1.Stage) Role {
	switch s {
	case sednav1.StageTrain:
		return RoleTrain
	case sednav1.StageEval:
		return RoleEval
	}
	return ""
}

// wantedStagePod is the stage pod the status asks for, and its role; "" when
// no stage pod is wanted (the train trigger waits, the deploy stage runs, or
// the job is finished).
func wantedStagePod(job string, st *Status) (string, Role) {
	switch st.State {
	case sednav1.StageReady, sednav1.StageStarting, sednav1.StageRunning:
	default:
		return "", ""
	}
	role := roleOf(st.Stage)
	if role == "" {
		return "", ""
	}
	return StagePodName(job, st.Stage, st.Round, st.Attempt), role
}

// machine moves one job's cycle. Each move the user should hear of leaves an
// event, recorded once the status is written.
type machine struct {
	job    string
	st     *Status
	now    metav1.Time
	config *Config
	events []common.Event
}

func (m *machine) event(eventType, reason, format string, args ...any) {
	m.events = append(m.events, common.Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// condition appends a transition of the current round.
func (m *machine) condition(stage sednav1.Stage, state sednav1.StageState, reason, message string) {
	m.st.Conditions = append(m.st.Conditions, sednav1.StageCondition{
		Type: state, Status: corev1.ConditionTrue, Stage: stage,
		LastHeartbeatTime: m.now, LastTransitionTime: m.now,
		Reason: reason, Message: message,
	})
	if extra := len(m.st.Conditions) - MaxConditions; extra > 0 {
		m.st.Conditions = append([]sednav1.StageCondition(nil), m.st.Conditions[extra:]...)
	}
}

// enter moves to a stage and state, recording the transition.
func (m *machine) enter(stage sednav1.Stage, state sednav1.StageState, reason, message string) {
	m.st.Stage, m.st.State = stage, state
	m.condition(stage, state, reason, message)
}

// stamp is the machine's time, for a status field of its own.
func (m *machine) stamp() *metav1.Time {
	t := m.now
	return &t
}

// round is the current round, made when the status lost it.
func (m *machine) round() *sednav1.RoundStatus {
	if m.st.CurrentRound == nil {
		m.st.CurrentRound = &sednav1.RoundStatus{Round: m.st.Round}
	}
	return m.st.CurrentRound
}

// start begins round 1 of a new job.
func (m *machine) start() {
	m.st.Round, m.st.Attempt = 1, 0
	m.st.StartTime = m.stamp()
	// Named once it is made (manageWorkers): a job blocked on a missing
	// Model or Dataset names no pod that does not exist.
	m.st.InferenceWorker = ""
	m.st.Conditions = nil
	m.enter(sednav1.StageTrain, sednav1.StageWaiting, "Started", "round 1 waits for the train trigger")
	m.event(corev1.EventTypeNormal, ReasonStarted, "Started the learning cycle: round 1 waits for the train trigger")
}

// trigger is what the LocalController reports when the train trigger fires.
type trigger struct {
	round           int32
	samples         int32
	trainDatasetURL string
	testDatasetURL  string
	at              metav1.Time
}

// trainReady starts the round's train stage, if the cycle waits for this
// round's trigger.
func (m *machine) trainReady(t trigger) (moved bool, why string) {
	if m.st.Stage != sednav1.StageTrain || m.st.State != sednav1.StageWaiting {
		return false, fmt.Sprintf("the cycle is at %s/%s, not waiting for a train trigger", m.st.Stage, m.st.State)
	}
	if t.round != m.st.Round {
		return false, fmt.Sprintf("the trigger is for round %d, the cycle is at round %d", t.round, m.st.Round)
	}
	var waiting []sednav1.StageCondition
	for i := len(m.st.Conditions) - 1; i >= 0; i-- {
		if c := m.st.Conditions[i]; c.Stage == sednav1.StageTrain && c.Type == sednav1.StageWaiting {
			waiting = []sednav1.StageCondition{c}
			break
		}
	}
	m.st.Conditions = waiting
	m.st.Attempt = 1
	m.st.CurrentRound = &sednav1.RoundStatus{
		Round:           t.round,
		StartTime:       &t.at,
		NumberOfSamples: t.samples,
		TrainDatasetURL: t.trainDatasetURL,
		TestDatasetURL:  t.testDatasetURL,
	}
	m.enter(sednav1.StageTrain, sednav1.StageReady, "TriggerFired",
		fmt.Sprintf("the train trigger fired with %d new samples", t.samples))
	return true, ""
}

// starting records that the current try's pod was created (or seen).
func (m *machine) starting(pod string) {
	if m.st.State != sednav1.StageReady {
		return
	}
	m.enter(m.st.Stage, sednav1.StageStarting, "PodCreated", "pod "+pod)
	m.event(corev1.EventTypeNormal, ReasonStageStarting, "Round %d: %s try %d starts in pod %s", m.st.Round, m.st.Stage, m.st.Attempt, pod)
}

// running records that the current try runs; by says who told.
func (m *machine) running(by string) {
	switch m.st.State {
	case sednav1.StageReady, sednav1.StageStarting:
		m.enter(m.st.Stage, sednav1.StageRunning, "Running", by)
	}
}

// trained ends the train stage with the models it produced; the eval stage
// is next.
func (m *machine) trained(models []sednav1.RoundModel) {
	r := m.round()
	r.Models = models
	urls := make([]string, len(models))
	for i, mo := range models {
		urls[i] = mo.URL
	}
	m.condition(sednav1.StageTrain, sednav1.StageCompleted, "Trained", "trained "+strings.Join(urls, ", "))
	m.st.Attempt = 1
	m.enter(sednav1.StageEval, sednav1.StageReady, "Trained", "evaluating "+models[0].URL)
}

// evaluated ends the eval stage: the new model's metrics are recorded, with
// the model the eval worker wrote of its own (nil when none), and the round
// goes to the deploy stage or ends without one.
func (m *machine) evaluated(metrics []sednav1.Metric, own *sednav1.RoundModel, deploy bool, sentence string) {
	r := m.round()
	if len(r.Models) > 0 {
		r.Models[0].Metrics = metrics
	}
	r.EvaluatedModel = own
	m.condition(sednav1.StageEval, sednav1.StageCompleted, "Evaluated", sentence)
	if !deploy {
		m.finishRound(sednav1.RoundNotDeployed, sentence)
		return
	}
	r.Message = sentence
	m.st.Attempt = 1
	m.enter(sednav1.StageDeploy, sednav1.StageReady, "DeployDecided", sentence)
}

// deployed ends the deploy stage: the round's model is served, by the
// running inference worker (hot) or by a new one for the round.
func (m *machine) deployed(hot bool) {
	m.st.DeployedRound = m.st.Round
	if !hot {
		m.st.InferenceWorker = InferenceWorkerName(m.job, m.st.Round)
	}
	msg := m.round().Message
	if msg == "" {
		msg = "deployed"
	}
	m.finishRound(sednav1.RoundDeployed, msg)
}

// deployFailed ends a round whose deploy the edge could not do (its
// LocalController tried the copy again, with backoff, for a bounded time
// first): the round is Failed with the reason in the history, the inference
// worker keeps serving the model it served, and the next round waits for its
// train trigger. A deploy that failed once must not end a job that may
// deploy the next round.
func (m *machine) deployFailed(reason string) {
	m.condition(sednav1.StageDeploy, sednav1.StageFailed, "DeployFailed", reason)
	m.finishRound(sednav1.RoundFailed, "Deploy failed: "+reason)
}

// failTry records a failed try of the current stage: the next try, or the
// end of the job when the tries are used up.
func (m *machine) failTry(reason string) {
	stage, attempt, attempts := m.st.Stage, m.st.Attempt, m.config.StageAttempts
	if attempt < attempts {
		m.condition(stage, sednav1.StageFailed, "TryFailed", fmt.Sprintf("try %d of %d: %s", attempt, attempts, reason))
		m.st.Attempt++
		m.enter(stage, sednav1.StageReady, "Retrying", fmt.Sprintf("try %d of %d", m.st.Attempt, attempts))
		m.event(corev1.EventTypeWarning, ReasonStageRetry, "Round %d: %s try %d of %d failed (%s); trying again",
			m.st.Round, stage, attempt, attempts, reason)
		return
	}
	msg := fmt.Sprintf("%s failed after %d tries: %s", stage, attempt, reason)
	m.endRound(sednav1.RoundFailed, msg)
	m.st.State = sednav1.StageFailed
	m.st.CompletionTime = m.stamp()
	m.condition(stage, sednav1.StageFailed, "TriesExhausted", msg)
	m.event(corev1.EventTypeWarning, ReasonJobFailed, "Round %d: %s", m.st.Round, msg)
}

// endRound moves the current round, with its result, into the history.
func (m *machine) endRound(result, message string) {
	r := m.round()
	r.Result, r.Message, r.CompletionTime = result, message, m.stamp()
	m.st.History = append(m.st.History, *r)
	if extra := len(m.st.History) - m.config.HistoryLimit; extra > 0 {
		m.st.History = append([]sednav1.RoundStatus(nil), m.st.History[extra:]...)
	}
	m.st.CurrentRound = nil
}

// finishRound ends a round that did not fail; the next one waits for its
// train trigger.
func (m *machine) finishRound(result, message string) {
	finished := m.st.Round
	m.endRound(result, message)
	m.st.Round++
	m.st.Attempt = 0
	m.st.Conditions = nil
	eventType, reason, outcome := corev1.EventTypeNormal, ReasonRoundNotDeployed, "was not deployed"
	switch result {
	case sednav1.RoundDeployed:
		reason, outcome = ReasonRoundDeployed, "was deployed"
	case sednav1.RoundFailed:
		eventType, reason, outcome = corev1.EventTypeWarning, ReasonRoundFailed, "failed"
	}
	m.enter(sednav1.StageTrain, sednav1.StageWaiting, "RoundFinished",
		fmt.Sprintf("round %d %s; round %d waits for the train trigger", finished, outcome, m.st.Round))
	m.event(eventType, reason, "Round %d: %s", finished, message)
}

// reportGraceLeft is how much longer the current try waits for the report
// of its pod, name, which ended Succeeded without one; 0 when the wait is
// over and the try fails. The rule: a Sedna worker reports before it
// exits, and the LocalController keeps the report in its outbox until the
// cloud acknowledges it, so a report still on its way comes within
// Config.ReportGrace of the pod's end while the node's link is up. The
// grace counts from the pod's end as the cycle first saw it (the stage
// condition PodEndedWithoutReport, written then, says so), or from the
// job's EdgeLinked condition turning True when the link came back later;
// while EdgeLinked is False the reports cannot come, and the try waits.
func (m *machine) reportGraceLeft(name string) time.Duration {
	grace := m.config.ReportGrace
	var ended *sednav1.StageCondition
	for i := len(m.st.Conditions) - 1; i >= 0; i-- {
		if c := &m.st.Conditions[i]; c.Stage == m.st.Stage && c.Reason == reasonEndedWithoutReport && strings.HasPrefix(c.Message, "pod "+name+" ") {
			ended = c
			break
		}
	}
	if ended == nil {
		m.condition(m.st.Stage, m.st.State, reasonEndedWithoutReport, fmt.Sprintf(
			"pod %s ended Succeeded without its worker reporting completed; the report is given %s while the edge link is up, then the try fails",
			name, grace))
		return grace
	}
	from := ended.LastTransitionTime.Time
	if linked := common.FindJobCondition(m.st.JobConditions, links.ConditionEdgeLinked); linked != nil {
		if linked.Status == corev1.ConditionFalse {
			return grace
		}
		if t := linked.LastTransitionTime.Time; t.After(from) {
			from = t
		}
	}
	return max(0, from.Add(grace).Sub(m.now.Time))
}
