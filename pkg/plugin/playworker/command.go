package playworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// Command is `kubectl nereid play-worker`.
func Command() cli.Command {
	return cli.Command{
		Name:    "play-worker",
		Summary: "Post a worker's reports as one of your job's worker pods (local run).",
		Run:     run,
	}
}

func run(ctx context.Context, env *cli.Env, args []string) error {
	o, kube, err := parse(env, args)
	if err != nil {
		return err
	}
	clients, err := kube.Clients()
	if err != nil {
		return err
	}
	return play(ctx, env.Stdout, clients.Kube, clients.Namespace, o)
}

// play reads the pod, sends its reports and finishes it, saying each step
// on out.
func play(ctx context.Context, out io.Writer, kube kubernetes.Interface, namespace string, o *options) error {
	pod, err := kube.CoreV1().Pods(namespace).Get(ctx, o.pod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the worker pod: %w", err)
	}
	w, err := o.workerOf(pod)
	if err != nil {
		return err
	}
	if pod.Status.StartTime != nil {
		o.started = pod.Status.StartTime.Time
	}
	if o.finish != "" {
		// Before anything is sent: a refusal leaves nothing half done.
		if err := RequireKwokNode(ctx, kube, w.Node); err != nil {
			return fmt.Errorf("--finish: %w", err)
		}
	}
	if err := o.send(ctx, out, kube, w); err != nil {
		return err
	}
	if o.finish == "" {
		return nil
	}
	if err := FinishPod(ctx, kube, w.Namespace, w.Name, o.finish); err != nil {
		return err
	}
	fmt.Fprintf(out, "pod %s/%s marked %s, as a kubelet would\n", w.Namespace, w.Name, o.finish)
	return nil
}

// workerOf is pod as a Worker, its stage defaulted. A Nereid pod of a kind
// whose workers send no reports (a DIJob's) is one when it is only to be
// finished: on the local run nothing else ends it, kwok's pods never exit.
func (o *options) workerOf(pod *corev1.Pod) (Worker, error) {
	w, err := WorkerOf(pod)
	switch {
	case errors.Is(err, ErrSendsNoReports) && o.finish != "" && !o.reportFlags && o.stage == "":
		o.finishOnly = true
		return Worker{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName}, nil
	case err != nil:
		return Worker{}, err
	}
	return w, o.defaultStage(w)
}

// send sends w's reports, if any, to its node's LocalController.
func (o *options) send(ctx context.Context, out io.Writer, kube kubernetes.Interface, w Worker) error {
	reports := o.reports(time.Now())
	if len(reports) == 0 {
		return nil
	}
	lc, err := o.localController(w)
	if err != nil {
		return err
	}
	poster := &Poster{Kube: kube, Tries: o.tries, Interval: o.interval, Progress: out}
	for _, r := range reports {
		body, err := r.Body(w)
		if err != nil {
			return err
		}
		if err := poster.Post(ctx, lc, w.Namespace, w.Name, body); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s (%s %s): %s%s, sent to %s's LocalController\n", w.Name, w.OwnerKind, w.OwnerName, describe(r), roundOf(r), w.Node)
	}
	return nil
}

// localController is the URL of w's node's LocalController: --lc-url, else
// the one the local run in --local-run wrote.
func (o *options) localController(w Worker) (string, error) {
	if o.lcURL != "" {
		return o.lcURL, nil
	}
	url, err := LocalControllerOf(o.localRun, w.Node)
	if err != nil {
		return "", fmt.Errorf("--local-run: %w (or give its URL with --lc-url)", err)
	}
	return url, nil
}

// defaultStage takes the stage from the worker's role when --kind was not
// given.
func (o *options) defaultStage(w Worker) error {
	if o.stage != "" {
		return nil
	}
	switch w.Role {
	case "training", "train":
		o.stage = edgeproto.StageTrain
	case "eval":
		o.stage = edgeproto.StageEval
	case "inference", "edge":
		o.stage = edgeproto.StageInference
	case "aggregation":
		// Sedna's aggregator speaks to its trainers, not to a LocalController.
		if o.finish != "" && !o.reportFlags {
			o.finishOnly = true
			return nil
		}
		return &cli.UsageError{Err: fmt.Errorf("pod %s is a federated learning aggregator, which sends no reports: give --finish alone to finish it, or --kind to send a report anyway", w.Name)}
	default:
		return &cli.UsageError{Err: fmt.Errorf("--kind is required: pod %s's role %q does not say which stage it reports (train, eval, deploy or inference)", w.Name, w.Role)}
	}
	if o.rounds > 0 && o.stage != edgeproto.StageTrain {
		return &cli.UsageError{Err: fmt.Errorf("--rounds plays a training worker, and pod %s's role %q is not one", w.Name, w.Role)}
	}
	return nil
}

// reports are the reports to send, in order.
func (o *options) reports(now time.Time) []Report {
	if o.finishOnly {
		return nil
	}
	results := ModelResults(o.modelFormat, o.modelURLs, o.metrics)
	switch {
	case o.rounds > 0:
		var rs []Report
		for round := 1; round < o.rounds; round++ {
			rs = append(rs, TrainingRound(round, o.rounds, edgeproto.WorkerRunning, nil, nil))
		}
		return append(rs, TrainingRound(o.rounds, o.rounds, o.status, nil, results))
	case o.stage == edgeproto.StageInference:
		start := o.started
		if start.IsZero() {
			start = now
		}
		r := Inference(start, now, o.inferences, o.hardExamples)
		r.Status = o.status
		return []Report{r}
	}
	r := Report{Stage: o.stage, Status: o.status, Results: results}
	if o.round > 0 {
		r = TrainingRound(o.round, o.totalRounds, o.status, nil, results)
		r.Stage = o.stage
	}
	return []Report{r}
}

// describe is a report's stage and status, for a line of output.
func describe(r Report) string {
	s := string(r.Stage)
	if r.Status != "" {
		s += " " + string(r.Status)
	}
	if n, ok := r.OwnerInfo["inferenceNumber"]; ok {
		s += fmt.Sprintf(" (%v inferences, %v hard examples)", n, r.OwnerInfo["hardExampleNumber"])
	}
	if len(r.Results) > 0 {
		var parts []string
		for _, res := range r.Results {
			if u, ok := res["url"]; ok {
				parts = append(parts, fmt.Sprint(u))
			}
			if m, ok := res["metrics"].(map[string]any); ok {
				for _, k := range sortedKeys(m) {
					parts = append(parts, k+"="+metricText(m[k]))
				}
			}
		}
		s += " [" + strings.Join(parts, " ") + "]"
	}
	return s
}

// metricText is a metric's value as it was given: a string as it is,
// anything else as JSON.
func metricText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func roundOf(r Report) string {
	round, ok := r.OwnerInfo["currentRound"]
	if !ok {
		return ""
	}
	if total, ok := r.OwnerInfo["totalRounds"]; ok {
		return fmt.Sprintf(", round %v/%v", round, total)
	}
	return fmt.Sprintf(", round %v", round)
}

// finishPhase is the value of --finish: "" (do not finish), Succeeded or
// Failed. Given alone, --finish is Succeeded.
type finishPhase struct{ phase *corev1.PodPhase }

func (f finishPhase) IsBoolFlag() bool { return true }

func (f finishPhase) String() string {
	if f.phase == nil {
		return ""
	}
	return string(*f.phase)
}

func (f finishPhase) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "succeeded":
		*f.phase = corev1.PodSucceeded
	case "failed":
		*f.phase = corev1.PodFailed
	case "false":
		*f.phase = ""
	default:
		return fmt.Errorf("%q is not succeeded or failed", s)
	}
	return nil
}
