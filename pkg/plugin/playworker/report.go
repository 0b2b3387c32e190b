// Package playworker plays a Sedna worker's part on the local run: it sends
// a LocalController, as one worker pod of a Nereid job or service, the
// reports Sedna's worker library sends (POST /sedna/workers/<pod>/info),
// and marks a worker pod finished as a kubelet would. It is `kubectl nereid
// play-worker`, and what hack/demo's demos post with.
//
// Guarantees:
//   - A report is sent as the pod it names and for the object the pod's
//     Nereid labels name (WorkerOf): never for an owner a caller chose, and
//     a pod that is no Nereid worker of a kind that reports (federated,
//     joint inference, incremental and lifelong learning) is refused.
//   - A report's body is Sedna's worker report (edgeproto.WorkerInfo) and is
//     checked as the LocalController checks it before it is sent.
//   - It is sent from the pod's own address (status.podIP), the only one
//     the LocalController takes that worker's reports from; the local run's
//     pods have loopback addresses, which this machine may speak from. When
//     it cannot, the error says so, and nothing is retried.
//   - A report the LocalController refuses with 403 (it has not been sent the
//     pod or its address yet), or whose connection fails, is sent again, a
//     bounded number of times (Poster.Tries); any other refusal ends at once
//     with the LocalController's reason.
//   - FinishPod changes a pod's status only on a kwok node, whose pods no
//     kubelet owns (RequireKwokNode); play-worker finishes any Nereid pod
//     there, a DIJob's too, whose workers send no reports.
//   - While a report waits (a LocalController down, or not yet sent the
//     pod), what it waits for is said at once (Poster.Progress).
package playworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// ErrSendsNoReports is why a Nereid pod of a kind whose workers report to
// no LocalController (a DIJob's) is no Worker: it may only be finished.
var ErrSendsNoReports = errors.New("give --finish or --finish=failed alone to end it as its kubelet would")

// Worker is the pod a report is sent as, and what its labels say it is.
type Worker struct {
	Namespace, Name string
	// OwnerKind and OwnerName are the job or service the pod's labels name.
	OwnerKind edgeproto.OwnerKind
	OwnerName string
	// Role is the pod's nereid.io/worker-role label (training, aggregation,
	// train, eval, …).
	Role string
	// Node is the pod's node (spec.nodeName): whose LocalController takes
	// its reports.
	Node string
}

// WorkerOf is the worker pod is, as its Nereid labels say: the owner kind
// from nereid.io/owner-kind, the name from nereid.io/owner-name (or, for a
// name too long for a label, from the pod's controller reference whose UID
// is nereid.io/owner-uid). It says why when pod is not a Nereid worker of a
// kind whose workers report to a LocalController.
func WorkerOf(pod *corev1.Pod) (Worker, error) {
	kind, ok := pod.Labels[common.LabelOwnerKind]
	if !ok {
		return Worker{}, fmt.Errorf("pod %s/%s is not a Nereid worker: it has no %s label", pod.Namespace, pod.Name, common.LabelOwnerKind)
	}
	owner := edgeproto.OwnerKind(kind)
	if owner.APIKind() == "" {
		return Worker{}, fmt.Errorf("pod %s/%s is a worker of a %s, whose workers send no reports to a LocalController (those of %s do): %w",
			pod.Namespace, pod.Name, kind, ownerKindList(), ErrSendsNoReports)
	}
	name := pod.Labels[common.LabelOwnerName]
	if name == "" {
		name = controllerName(pod, owner)
	}
	if name == "" {
		return Worker{}, fmt.Errorf("pod %s/%s names no %s: neither a %s label nor a controller reference with UID %q",
			pod.Namespace, pod.Name, owner.APIKind(), common.LabelOwnerName, pod.Labels[common.LabelOwnerUID])
	}
	return Worker{Namespace: pod.Namespace, Name: pod.Name, OwnerKind: owner, OwnerName: name,
		Role: pod.Labels[common.LabelWorkerRole], Node: pod.Spec.NodeName}, nil
}

// controllerName is the name of pod's controller when it is the owner its
// owner-uid label names, or "".
func controllerName(pod *corev1.Pod, owner edgeproto.OwnerKind) string {
	ref := metav1.GetControllerOfNoCopy(pod)
	uid := pod.Labels[common.LabelOwnerUID]
	if ref == nil || uid == "" || string(ref.UID) != uid || ref.Kind != owner.APIKind() {
		return ""
	}
	return ref.Name
}

func ownerKindList() string {
	kinds := []string{string(edgeproto.OwnerFederatedLearningJob), string(edgeproto.OwnerJointInferenceService),
		string(edgeproto.OwnerIncrementalLearningJob), string(edgeproto.OwnerLifelongLearningJob)}
	return strings.Join(kinds, ", ")
}

// Report is what a worker says in one report.
type Report struct {
	// Stage is the report's kind: train, eval, deploy or inference.
	Stage edgeproto.Stage
	// Status is empty only for inference, whose workers send none.
	Status edgeproto.WorkerStatus
	// OwnerInfo is the report's ownerInfo; nil sends none.
	OwnerInfo map[string]any
	// Results are the report's results, each a JSON object.
	Results []map[string]any
}

// Body is the JSON w sends for r: Sedna's worker report, checked as the
// LocalController checks it.
func (r Report) Body(w Worker) ([]byte, error) {
	info := edgeproto.WorkerInfo{Name: w.Name, Namespace: w.Namespace, OwnerName: w.OwnerName, OwnerKind: w.OwnerKind,
		Kind: r.Stage, Status: r.Status}
	if r.OwnerInfo != nil {
		raw, err := json.Marshal(r.OwnerInfo)
		if err != nil {
			return nil, fmt.Errorf("encoding ownerInfo: %w", err)
		}
		info.OwnerInfo = raw
	}
	for i, res := range r.Results {
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encoding results[%d]: %w", i, err)
		}
		info.Results = append(info.Results, raw)
	}
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("the report of %s would be refused: %w", w.Name, err)
	}
	return json.Marshal(info)
}

// TrainingRound is the report of a federated learning training worker in
// round of total: running, with ownerInfo {currentRound, totalRounds}, or
// status with results when it ends (completed or failed). extra goes into
// ownerInfo too (a round's loss, say).
func TrainingRound(round, total int, status edgeproto.WorkerStatus, extra map[string]any, results []map[string]any) Report {
	info := map[string]any{"currentRound": round}
	if total > 0 {
		info["totalRounds"] = total
	}
	maps.Copy(info, extra)
	return Report{Stage: edgeproto.StageTrain, Status: status, OwnerInfo: info, Results: results}
}

// ModelResults are the results of a worker that made or judged the models
// at urls (a learning cycle's eval worker: the new model first, then the
// deployed one), each of format, the first with metrics; with no url and
// some metrics, one result of the metrics alone.
func ModelResults(format string, urls []string, metrics map[string]any) []map[string]any {
	if len(urls) == 0 {
		if len(metrics) == 0 {
			return nil
		}
		return []map[string]any{{"metrics": metrics}}
	}
	var out []map[string]any
	for i, u := range urls {
		res := map[string]any{"format": format, "url": u}
		if i == 0 && len(metrics) > 0 {
			res["metrics"] = metrics
		} else {
			res["metrics"] = map[string]any{}
		}
		out = append(out, res)
	}
	return out
}

// Inference is a joint inference edge worker's periodic report: its counts
// since start, as Sedna's worker sends them every LC_PERIOD seconds.
func Inference(start, now time.Time, inferences, hardExamples int) Report {
	ratio := 0.0
	if inferences > 0 {
		ratio = float64(hardExamples) / float64(inferences)
	}
	const layout = "2006-01-02 15:04:05" // Sedna's
	return Report{Stage: edgeproto.StageInference, OwnerInfo: map[string]any{
		"startTime": start.Format(layout), "updateTime": now.Format(layout),
		"inferenceNumber": inferences, "hardExampleNumber": hardExamples, "uploadCloudRatio": ratio,
	}}
}

// sortedKeys are m's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
