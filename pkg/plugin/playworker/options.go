package playworker

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/internal/command"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// options are play-worker's flags, checked.
type options struct {
	pod          string
	stage        edgeproto.Stage
	status       edgeproto.WorkerStatus
	round        int
	totalRounds  int
	rounds       int
	metrics      map[string]any
	modelURLs    []string
	modelFormat  string
	inferences   int
	hardExamples int
	finish       corev1.PodPhase
	localRun     string
	lcURL        string
	tries        int
	// interval is the pause between tries (Poster's default when 0).
	interval time.Duration
	// reportFlags says whether a flag about the report's content was
	// given; finishOnly, that the pod is only to be finished.
	reportFlags, finishOnly bool
	// started is when the worker pod started (an inference report's
	// startTime); zero when unknown.
	started time.Time
}

const usageHead = `play-worker <pod> [flags]

Sends, as the worker pod <pod> of your own job or service, the reports a
Sedna worker image sends its node's LocalController, so that a manifest can
be tried end to end on the local run (make local-up) with no image at all.
The pod's Nereid labels say which job it reports for, never a flag; the
report goes from the pod's own address (status.podIP), the only one its
LocalController listens to for it, which this machine can use on the local
run, where pods have loopback addresses.

Examples:
  # A federated learning training worker: rounds 1 to 3, the last completed.
  kubectl nereid play-worker surface-defect-detection-train-0-x1 -n demo \
      --rounds 3 --metric accuracy=0.92 --model-url /model/round-3 --finish

  # One report of a training worker: round 2 of 5, running.
  kubectl nereid play-worker <pod> --kind train --status running --round 2 --total-rounds 5

  # A learning cycle's eval worker: the new model first, then the deployed one.
  kubectl nereid play-worker helmet-detection-demo-eval-1-0 --kind eval --status completed \
      --model-url /output/round-1/train/model.pb --model-url /models/deploy_model/saved_model.pb \
      --metric 'precision_delta=[0.15,0.12]' --finish

  # A joint inference edge worker's periodic counts.
  kubectl nereid play-worker <pod> --kind inference --inference-count 120 --hard-example-count 9

  # A worker that fails.
  kubectl nereid play-worker <pod> --kind train --status failed --finish=failed

  # A federated learning aggregator sends no reports: only finish it.
  kubectl nereid play-worker surface-defect-detection-aggregation-x2 -n demo --finish

  # Nor does a DIJob's pod: end its coordinator, and so the job, or fail it.
  kubectl nereid play-worker cartpole-dqn-v1-coordinator -n demo --finish=failed`

func newFlagSet(env *cli.Env, o *options) (*flag.FlagSet, *cli.KubeFlags) {
	fs := cli.NewFlagSet(env, "play-worker", "play-worker <pod> [flags]")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kubectl nereid %s\n\nFlags:\n", usageHead)
		command.PrintFlags(fs)
	}
	kube := cli.AddKubeFlags(fs)
	fs.Func("kind", "The report's stage: train, eval, deploy or inference (default: from the pod's nereid.io/worker-role: a training or train worker trains, an eval worker evaluates, an inference or joint inference edge worker infers).",
		func(s string) error {
			return oneOf(&o.stage, s, []edgeproto.Stage{edgeproto.StageTrain, edgeproto.StageEval, edgeproto.StageDeploy, edgeproto.StageInference})
		})
	fs.Func("status", "The worker's status: ready, running, completed or failed (default: running; with --rounds, the last round's, default completed; an inference report sends none unless given).",
		func(s string) error {
			return oneOf(&o.status, s, []edgeproto.WorkerStatus{edgeproto.WorkerReady, edgeproto.WorkerRunning, edgeproto.WorkerCompleted, edgeproto.WorkerFailed})
		})
	fs.IntVar(&o.round, "round", 0, "The round the report is about, sent as ownerInfo.currentRound (a federated learning worker's; a learning cycle's stage pod needs none: its name says its round).")
	fs.IntVar(&o.totalRounds, "total-rounds", 0, "The rounds in all, sent as ownerInfo.totalRounds with --round.")
	fs.IntVar(&o.rounds, "rounds", 0, "Play a whole federated training worker: rounds 1 to N, running, then round N with --status (completed) and the results of --metric and --model-url.")
	fs.Func("metric", "A metric of the result, key=value; the value is JSON when it parses (0.9, [0.1,0.2]), else a string. Repeatable.", o.addMetric)
	fs.Func("model-url", "The URL or node path of a model the worker made (train) or judged (eval: the new model first, then the deployed one). Each is a result {format, url, metrics}; the metrics go with the first. Repeatable.",
		func(s string) error {
			if s == "" {
				return errors.New("is empty")
			}
			o.modelURLs = append(o.modelURLs, s)
			return nil
		})
	fs.StringVar(&o.modelFormat, "model-format", "pb", "The format of the models of --model-url.")
	fs.IntVar(&o.inferences, "inference-count", 0, "With --kind inference: the inferences made since the worker started (ownerInfo.inferenceNumber; ownerInfo.startTime is the pod's start).")
	fs.IntVar(&o.hardExamples, "hard-example-count", 0, "With --kind inference: the hard examples among them, sent to the cloud (ownerInfo.hardExampleNumber).")
	fs.Var(finishPhase{&o.finish}, "finish", "Then mark the pod finished as its kubelet would: --finish is Succeeded (exit code 0), --finish=failed Failed (exit code 1). "+
		"Alone, it only finishes the pod: any Nereid pod, a DIJob's too. Only on a kwok node (annotation kwok.x-k8s.io/node=fake), as the local run's: on a real node the kubelet owns the pod's status, and play-worker refuses.")
	fs.StringVar(&o.localRun, "local-run", DefaultLocalRun(), "The local run's state folder, where make local-up wrote edge/<node>/lc-server, the URL of each node's LocalController.")
	fs.StringVar(&o.lcURL, "lc-url", "", "The URL of the LocalController of the pod's node (instead of the local run's, from --local-run).")
	fs.IntVar(&o.tries, "tries", 30, "How often a report is sent while the LocalController has not yet been sent the pod (403) or cannot be reached, a second apart; what it waits for is said at once.")
	return fs, kube
}

// parse parses play-worker's arguments: the pod and the flags, in any
// order, as kubectl takes them.
func parse(env *cli.Env, args []string) (*options, *cli.KubeFlags, error) {
	o := &options{}
	fs, kube := newFlagSet(env, o)
	var pods []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pods = append(pods, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(pods) == 0:
		return nil, nil, usageErrorf("the worker pod is missing: kubectl nereid play-worker <pod> [flags]")
	case len(pods) > 1:
		return nil, nil, usageErrorf("one worker pod at a time, not %s", strings.Join(pods, ", "))
	case kube.AllNamespaces:
		return nil, nil, usageErrorf("--all-namespaces: a worker pod is in one namespace; give it with -n")
	}
	o.pod = pods[0]
	if err := o.check(fs); err != nil {
		return nil, nil, err
	}
	return o, kube, nil
}

// check checks the flags together, and fills in --status's default.
func (o *options) check(fs *flag.FlagSet) error {
	given := func(name string) bool { return command.Given(fs, name) }
	switch {
	case o.rounds < 0:
		return usageErrorf("--rounds %d: at least 1", o.rounds)
	case o.rounds > 0 && (given("round") || given("total-rounds")):
		return usageErrorf("--rounds plays every round; --round and --total-rounds are for one report")
	case o.rounds > 0 && o.stage != "" && o.stage != edgeproto.StageTrain:
		return usageErrorf("--rounds plays a training worker, not --kind %s", o.stage)
	case o.round < 0, given("round") && o.round == 0:
		return usageErrorf("--round %d: rounds count from 1", o.round)
	case given("total-rounds") && !given("round"):
		return usageErrorf("--total-rounds goes with --round")
	case o.totalRounds != 0 && o.totalRounds < o.round:
		return usageErrorf("--total-rounds %d is less than --round %d", o.totalRounds, o.round)
	case (given("inference-count") || given("hard-example-count")) && o.stage != edgeproto.StageInference:
		return usageErrorf("--inference-count and --hard-example-count go with --kind inference")
	case o.inferences < 0 || o.hardExamples < 0 || o.hardExamples > o.inferences:
		return usageErrorf("--hard-example-count %d must be between 0 and --inference-count %d", o.hardExamples, o.inferences)
	case given("lc-url") && given("local-run"):
		return usageErrorf("--lc-url and --local-run both say where the LocalController is; give one")
	case o.tries < 1:
		return usageErrorf("--tries %d: at least 1", o.tries)
	}
	for _, f := range []string{"status", "round", "total-rounds", "rounds", "metric", "model-url", "inference-count", "hard-example-count"} {
		o.reportFlags = o.reportFlags || given(f)
	}
	if o.status == "" && o.stage != edgeproto.StageInference {
		o.status = edgeproto.WorkerRunning
		if o.rounds > 0 {
			o.status = edgeproto.WorkerCompleted
		}
	}
	return nil
}

// addMetric adds one --metric key=value.
func (o *options) addMetric(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if o.metrics == nil {
		o.metrics = map[string]any{}
	}
	if _, dup := o.metrics[key]; dup {
		return fmt.Errorf("%s is given twice", key)
	}
	o.metrics[key] = metricValue(value)
	return nil
}

// metricValue is value as JSON when it is JSON (numbers as written), else
// the string.
func metricValue(value string) any {
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() || !json.Valid([]byte(value)) {
		return value
	}
	return v
}

func oneOf[T ~string](p *T, s string, allowed []T) error {
	for _, a := range allowed {
		if T(s) == a {
			*p = a
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%q is not one of %s", s, strings.Join(names, ", "))
}

func usageErrorf(format string, args ...any) error {
	return &cli.UsageError{Err: fmt.Errorf(format, args...)}
}
