package playworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// podIP is the worker pod's address in these tests: a loopback address
// other than the server's own, so that a report from it shows the client
// was bound to it.
const podIP = "127.0.0.2"

// workerPod builds a Nereid worker pod of a federated learning job.
func workerPod(name, role, node, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{
			common.LabelOwnerKind: "federatedlearningjob", common.LabelOwnerName: "fl", common.LabelOwnerUID: "uid-1",
			common.LabelWorkerRole: role,
		}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}},
	}
}

func node(name string, kwok bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if kwok {
		n.Annotations = map[string]string{KwokNodeAnnotation: KwokNodeValue}
	}
	return n
}

// lcStandIn is a LocalController's worker API as far as play-worker sees
// it: it records each request and answers with the next of codes (then 200).
type lcStandIn struct {
	mu       sync.Mutex
	requests []lcRequest
	codes    []int
}

type lcRequest struct {
	Path, From, ContentType string
	Body                    map[string]any
}

func (s *lcStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var decoded map[string]any
	if err := json.Unmarshal(body, &decoded); err != nil {
		decoded = map[string]any{"<not JSON>": string(body)}
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, lcRequest{Path: r.Method + " " + r.URL.Path, From: host, ContentType: r.Header.Get("Content-Type"), Body: decoded})
	code := http.StatusOK
	if len(s.codes) > 0 {
		code, s.codes = s.codes[0], s.codes[1:]
	}
	w.WriteHeader(code)
	if code != http.StatusOK {
		_, _ = w.Write([]byte(`{"error":"not from the worker"}`))
	}
}

func (s *lcStandIn) seen() []lcRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]lcRequest(nil), s.requests...)
}

func startLC(t *testing.T, codes ...int) (*lcStandIn, string) {
	s := &lcStandIn{codes: codes}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// decode is body as the stand-in decodes it.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("bad want body %s: %v", body, err)
	}
	return m
}

func TestPlayWorkerPostsSednaReportsAsThePodFromItsAddress(t *testing.T) {
	const trainer = "fl-train-0"
	fromTrainer := func(body string) lcRequest {
		return lcRequest{Path: "POST /sedna/workers/" + trainer + "/info", From: podIP, ContentType: "application/json", Body: decode(t, body)}
	}
	const head = `"name":"fl-train-0","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob"`
	for name, tc := range map[string]struct {
		args    []string
		want    []lcRequest
		wantOut string
	}{
		"a whole training worker": {
			args: []string{"--rounds", "3", "--metric", "accuracy=0.92", "--model-url", "/model/round-3"},
			want: []lcRequest{
				fromTrainer(`{` + head + `,"kind":"train","status":"running","ownerInfo":{"currentRound":1,"totalRounds":3}}`),
				fromTrainer(`{` + head + `,"kind":"train","status":"running","ownerInfo":{"currentRound":2,"totalRounds":3}}`),
				fromTrainer(`{` + head + `,"kind":"train","status":"completed","ownerInfo":{"currentRound":3,"totalRounds":3},` +
					`"results":[{"format":"pb","url":"/model/round-3","metrics":{"accuracy":0.92}}]}`),
			},
			wantOut: "fl-train-0 (federatedlearningjob fl): train running, round 1/3, sent to edge-0's LocalController\n" +
				"fl-train-0 (federatedlearningjob fl): train running, round 2/3, sent to edge-0's LocalController\n" +
				"fl-train-0 (federatedlearningjob fl): train completed [/model/round-3 accuracy=0.92], round 3/3, sent to edge-0's LocalController\n",
		},
		"one round, the stage from the pod's role": {
			args:    []string{"--round", "2", "--total-rounds", "5"},
			want:    []lcRequest{fromTrainer(`{` + head + `,"kind":"train","status":"running","ownerInfo":{"currentRound":2,"totalRounds":5}}`)},
			wantOut: "fl-train-0 (federatedlearningjob fl): train running, round 2/5, sent to edge-0's LocalController\n",
		},
		"an eval worker's two models, metrics with the first": {
			args: []string{"--kind", "eval", "--status", "completed", "--model-url", "/out/new.pb", "--model-url", "/models/deployed.pb",
				"--model-format", "ckpt", "--metric", "precision_delta=[0.15,-0.03]", "--metric", "note=better"},
			want: []lcRequest{fromTrainer(`{` + head + `,"kind":"eval","status":"completed","results":[` +
				`{"format":"ckpt","url":"/out/new.pb","metrics":{"precision_delta":[0.15,-0.03],"note":"better"}},` +
				`{"format":"ckpt","url":"/models/deployed.pb","metrics":{}}]}`)},
			wantOut: "fl-train-0 (federatedlearningjob fl): eval completed [/out/new.pb note=better precision_delta=[0.15,-0.03] /models/deployed.pb], sent to edge-0's LocalController\n",
		},
		"a failed worker": {
			args:    []string{"--kind", "train", "--status", "failed"},
			want:    []lcRequest{fromTrainer(`{` + head + `,"kind":"train","status":"failed"}`)},
			wantOut: "fl-train-0 (federatedlearningjob fl): train failed, sent to edge-0's LocalController\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			lc, url := startLC(t)
			kube := fake.NewClientset(workerPod(trainer, "training", "edge-0", podIP))
			var out bytes.Buffer
			if err := playArgs(t, &out, kube, append([]string{trainer, "--lc-url", url}, tc.args...)); err != nil {
				t.Fatalf("play-worker: %v", err)
			}
			if diff := cmp.Diff(tc.want, lc.seen()); diff != "" {
				t.Errorf("requests to the LocalController (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
		})
	}
}

// playArgs runs play-worker's parse and play with kube in namespace ns.
func playArgs(t *testing.T, out io.Writer, kube *fake.Clientset, args []string) error {
	t.Helper()
	o, _, err := parse(&cli.Env{Stdout: out, Stderr: io.Discard}, args)
	if err != nil {
		return err
	}
	return play(t.Context(), out, kube, "ns", o)
}

func TestInferenceFlagsSendSednasCounters(t *testing.T) {
	o, _, err := parse(&cli.Env{Stdout: io.Discard, Stderr: io.Discard}, []string{"ji-edge-x", "--kind", "inference", "--inference-count", "120", "--hard-example-count", "9"})
	if err != nil {
		t.Fatal(err)
	}
	o.started = time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	reports := o.reports(o.started.Add(90 * time.Minute))
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1", len(reports))
	}
	w := Worker{Namespace: "ns", Name: "ji-edge-x", OwnerKind: edgeproto.OwnerJointInferenceService, OwnerName: "ji"}
	body, err := reports[0].Body(w)
	if err != nil {
		t.Fatal(err)
	}
	// No status: Sedna's inference workers send none.
	want := decode(t, `{"name":"ji-edge-x","namespace":"ns","ownerName":"ji","ownerKind":"jointinferenceservice","kind":"inference",`+
		`"ownerInfo":{"startTime":"2026-11-27 08:30:00","updateTime":"2026-11-27 10:00:00","inferenceNumber":120,"hardExampleNumber":9,"uploadCloudRatio":0.075}}`)
	if diff := cmp.Diff(want, decode(t, string(body))); diff != "" {
		t.Errorf("inference report (-want,+got):\n%s", diff)
	}
}

func TestFinishMarksAKwokPodAsItsKubeletWould(t *testing.T) {
	for name, tc := range map[string]struct {
		flag      string
		wantPhase corev1.PodPhase
		wantCode  int32
	}{
		"succeeded": {flag: "--finish", wantPhase: corev1.PodSucceeded, wantCode: 0},
		"failed":    {flag: "--finish=failed", wantPhase: corev1.PodFailed, wantCode: 1},
	} {
		t.Run(name, func(t *testing.T) {
			_, url := startLC(t)
			kube := fake.NewClientset(workerPod("fl-train-0", "training", "edge-0", podIP), node("edge-0", true))
			if err := playArgs(t, io.Discard, kube, []string{"fl-train-0", "--lc-url", url, "--rounds", "1", tc.flag}); err != nil {
				t.Fatalf("play-worker: %v", err)
			}
			p, err := kube.CoreV1().Pods("ns").Get(t.Context(), "fl-train-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			if p.Status.Phase != tc.wantPhase || term == nil || term.ExitCode != tc.wantCode || p.Status.ContainerStatuses[0].Ready {
				t.Errorf("pod status = %s, container %+v; want %s, terminated with exit code %d, not ready",
					p.Status.Phase, p.Status.ContainerStatuses[0], tc.wantPhase, tc.wantCode)
			}
		})
	}
}

func TestFinishAloneFinishesAnAggregatorAndSendsNothing(t *testing.T) {
	kube := fake.NewClientset(workerPod("fl-agg", "aggregation", "cloud-0", podIP), node("cloud-0", true))
	// The local run has no LocalController on the aggregator's node (make
	// local-up runs none on cloud nodes): sending anything would fail.
	if err := playArgs(t, io.Discard, kube, []string{"fl-agg", "--local-run", "testdata/localrun", "--finish"}); err != nil {
		t.Fatalf("play-worker: %v", err)
	}
	p, err := kube.CoreV1().Pods("ns").Get(t.Context(), "fl-agg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("aggregator is %s, want Succeeded", p.Status.Phase)
	}
}

func TestFinishAloneEndsANereidPodOfAKindThatSendsNoReports(t *testing.T) {
	for name, tc := range map[string]struct {
		flag      string
		wantPhase corev1.PodPhase
	}{
		"succeeded": {flag: "--finish", wantPhase: corev1.PodSucceeded},
		"failed":    {flag: "--finish=failed", wantPhase: corev1.PodFailed},
	} {
		t.Run(name, func(t *testing.T) {
			coordinator := workerPod("di-coordinator", "coordinator", "cloud-0", podIP)
			coordinator.Labels[common.LabelOwnerKind] = "dijob"
			kube := fake.NewClientset(coordinator, node("cloud-0", true))
			var out bytes.Buffer
			// No LocalController anywhere: sending anything would fail.
			if err := playArgs(t, &out, kube, []string{"di-coordinator", "--local-run", "testdata/localrun", tc.flag}); err != nil {
				t.Fatalf("play-worker: %v", err)
			}
			p, err := kube.CoreV1().Pods("ns").Get(t.Context(), "di-coordinator", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != tc.wantPhase {
				t.Errorf("pod is %s, want %s", p.Status.Phase, tc.wantPhase)
			}
			if want := "pod ns/di-coordinator marked " + string(tc.wantPhase) + ", as a kubelet would\n"; out.String() != want {
				t.Errorf("output %q, want %q", out.String(), want)
			}
		})
	}
}

func TestPlayWorkerSaysAtOnceWhatItWaitsFor(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, tc := range map[string]struct {
		lc      string
		codes   []int
		wantOut string
	}{
		"a LocalController that is down": {lc: down.URL,
			wantOut: "waiting for the LocalController at " + down.URL + " to answer (sending w's report from 127.0.0.2 to " + down.URL + ": "},
		"a LocalController that has not been sent the pod": {codes: []int{403, 403},
			wantOut: "to be sent pod w and its address (the LocalController at "},
	} {
		t.Run(name, func(t *testing.T) {
			lc := tc.lc
			if lc == "" {
				_, lc = startLC(t, tc.codes...)
			}
			clk := clocktesting.NewFakeClock(time.Now())
			progress := &syncBuffer{}
			p := &Poster{Kube: fake.NewClientset(workerPod("w", "training", "edge-0", podIP)), Tries: 30, Clock: clk, Progress: progress}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- p.Post(ctx, lc, "ns", "w", []byte(`{}`)) }()
			// The first pause has begun and no time has passed: what is
			// said now is said at once.
			testwait.Eventually(t, 10*time.Second, "Post pauses after its first try", func(context.Context) (bool, error) {
				return clk.HasWaiters(), nil
			})
			got := progress.String()
			cancel()
			<-done
			if !strings.Contains(got, tc.wantOut) || !strings.Contains(got, "trying again every 1s, up to 29 more times") {
				t.Errorf("said %q before the first pause ended, want a line with %q and the tries left", got, tc.wantOut)
			}
		})
	}
}

func TestPlayWorkerPrintsWhatItWaitsForAndHowItEnded(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	o, _, err := parse(&cli.Env{Stdout: io.Discard, Stderr: io.Discard}, []string{"fl-train-0", "--lc-url", down.URL, "--tries", "3"})
	if err != nil {
		t.Fatal(err)
	}
	o.interval = time.Millisecond
	var out bytes.Buffer
	err = play(t.Context(), &out, fake.NewClientset(workerPod("fl-train-0", "training", "edge-0", podIP)), "ns", o)
	if err == nil || !strings.Contains(err.Error(), "after 3 tries: sending fl-train-0's report") {
		t.Errorf("play-worker: %v, want the error of the last of 3 tries", err)
	}
	if want := "waiting for the LocalController at " + down.URL + " to answer ("; !strings.HasPrefix(out.String(), want) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("output %q, want one line starting %q", out.String(), want)
	}
}

// syncBuffer is a bytes.Buffer written and read from two goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestPlayWorkerRefusesBeforeSendingAnything(t *testing.T) {
	fsPod := workerPod("fl-train-0", "training", "edge-0", podIP)
	notWorker := workerPod("web", "", "edge-0", podIP)
	notWorker.Labels = map[string]string{"app": "web"}
	diWorker := workerPod("di-learner-0", "learner", "edge-0", podIP)
	diWorker.Labels[common.LabelOwnerKind] = "dijob"
	aggregator := workerPod("fl-agg", "aggregation", "cloud-0", podIP)
	longName := workerPod("long-train-0", "training", "edge-0", podIP)
	delete(longName.Labels, common.LabelOwnerName)
	longName.OwnerReferences = []metav1.OwnerReference{{Kind: "FederatedLearningJob", Name: "a-long-name", UID: types.UID("other-uid"), Controller: new(true)}}
	for name, tc := range map[string]struct {
		pods    []*corev1.Pod
		args    []string
		wantErr string
		usage   bool
	}{
		"a pod that is no worker": {pods: []*corev1.Pod{notWorker}, args: []string{"web", "--kind", "train"},
			wantErr: "pod ns/web is not a Nereid worker: it has no nereid.io/owner-kind label"},
		"a worker of a kind that does not report": {pods: []*corev1.Pod{diWorker}, args: []string{"di-learner-0", "--kind", "train"},
			wantErr: "is a worker of a dijob, whose workers send no reports to a LocalController (those of federatedlearningjob, jointinferenceservice, incrementallearningjob, lifelonglearningjob do): give --finish or --finish=failed alone"},
		"a report from a worker of a kind that does not report, then finish": {pods: []*corev1.Pod{diWorker}, args: []string{"di-learner-0", "--status", "completed", "--finish"},
			wantErr: "is a worker of a dijob, whose workers send no reports"},
		"--finish of a DIJob pod on a node that is not kwok's": {pods: []*corev1.Pod{diWorker}, args: []string{"di-learner-0", "--finish"},
			wantErr: "--finish: node edge-0 is not a kwok node"},
		"--finish of a pod that is not Nereid's": {pods: []*corev1.Pod{notWorker}, args: []string{"web", "--finish"},
			wantErr: "pod ns/web is not a Nereid worker"},
		"a controller reference that is not the labels' owner": {pods: []*corev1.Pod{longName}, args: []string{"long-train-0"},
			wantErr: `names no FederatedLearningJob: neither a nereid.io/owner-name label nor a controller reference with UID "uid-1"`},
		"an aggregator's report": {pods: []*corev1.Pod{aggregator}, args: []string{"fl-agg", "--status", "completed", "--finish"}, usage: true,
			wantErr: "pod fl-agg is a federated learning aggregator, which sends no reports: give --finish alone"},
		"a pod whose role says no stage": {pods: []*corev1.Pod{workerPod("ps-0", "server", "edge-0", podIP)}, args: []string{"ps-0"}, usage: true,
			wantErr: `--kind is required: pod ps-0's role "server" does not say which stage it reports`},
		"--finish on a node that is not kwok's": {pods: []*corev1.Pod{fsPod}, args: []string{"fl-train-0", "--rounds", "1", "--finish"},
			wantErr: "--finish: node edge-0 is not a kwok node (no annotation kwok.x-k8s.io/node=fake): its kubelet owns its pods' status"},
		"a node the local run has no LocalController on": {pods: []*corev1.Pod{fsPod}, args: []string{"fl-train-0", "--local-run", "testdata/localrun"},
			wantErr: `--local-run: the local run in testdata/localrun has no LocalController on node "edge-0" (it has them on edge-1)`},
		"a pod that is not there": {args: []string{"nope"}, wantErr: `reading the worker pod: pods "nope" not found`},
	} {
		t.Run(name, func(t *testing.T) {
			lc, url := startLC(t)
			kube := fake.NewClientset(node("edge-0", false))
			for _, p := range tc.pods {
				if _, err := kube.CoreV1().Pods("ns").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--local-run") {
				args = append(args, "--lc-url", url)
			}
			err := playArgs(t, io.Discard, kube, args)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("play-worker: %v, want an error with %q", err, tc.wantErr)
			}
			if isUsage := errors.As(err, new(*cli.UsageError)); isUsage != tc.usage {
				t.Errorf("usage error: %t, want %t (%v)", isUsage, tc.usage, err)
			}
			if got := lc.seen(); len(got) != 0 {
				t.Errorf("the LocalController was sent %d reports, want none", len(got))
			}
		})
	}
}

func TestBadFlagsAreUsageErrorsNamingTheFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"no pod":                      {args: []string{"--kind", "train"}, wantErr: "the worker pod is missing"},
		"two pods":                    {args: []string{"a", "b"}, wantErr: "one worker pod at a time, not a, b"},
		"an unknown kind":             {args: []string{"p", "--kind", "training"}, wantErr: `flag -kind: "training" is not one of train, eval, deploy, inference`},
		"an unknown status":           {args: []string{"p", "--status", "done"}, wantErr: `flag -status: "done" is not one of ready, running, completed, failed`},
		"a metric without a value":    {args: []string{"p", "--metric", "accuracy"}, wantErr: `flag -metric: "accuracy" is not key=value`},
		"a metric twice":              {args: []string{"p", "--metric", "a=1", "--metric", "a=2"}, wantErr: "flag -metric: a is given twice"},
		"round zero":                  {args: []string{"p", "--round", "0"}, wantErr: "--round 0: rounds count from 1"},
		"rounds with round":           {args: []string{"p", "--rounds", "3", "--round", "1"}, wantErr: "--rounds plays every round"},
		"rounds of an eval worker":    {args: []string{"p", "--rounds", "3", "--kind", "eval"}, wantErr: "--rounds plays a training worker, not --kind eval"},
		"total rounds alone":          {args: []string{"p", "--total-rounds", "3"}, wantErr: "--total-rounds goes with --round"},
		"total rounds below round":    {args: []string{"p", "--round", "4", "--total-rounds", "3"}, wantErr: "--total-rounds 3 is less than --round 4"},
		"inference counts for train":  {args: []string{"p", "--kind", "train", "--inference-count", "3"}, wantErr: "--inference-count and --hard-example-count go with --kind inference"},
		"more hard examples":          {args: []string{"p", "--kind", "inference", "--inference-count", "3", "--hard-example-count", "4"}, wantErr: "--hard-example-count 4 must be between 0 and --inference-count 3"},
		"two places for the LC":       {args: []string{"p", "--lc-url", "http://x", "--local-run", "d"}, wantErr: "--lc-url and --local-run both say where"},
		"a finish that is no phase":   {args: []string{"p", "--finish=done"}, wantErr: `-finish: "done" is not succeeded or failed`},
		"all namespaces":              {args: []string{"p", "-A"}, wantErr: "--all-namespaces: a worker pod is in one namespace"},
		"no tries":                    {args: []string{"p", "--tries", "0"}, wantErr: "--tries 0: at least 1"},
		"an empty model url":          {args: []string{"p", "--model-url", ""}, wantErr: "flag -model-url: is empty"},
		"a flag play-worker has none": {args: []string{"p", "--owner", "someone-else"}, wantErr: "flag provided but not defined: -owner"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := parse(&cli.Env{Stdout: io.Discard, Stderr: io.Discard}, tc.args)
			if !errors.As(err, new(*cli.UsageError)) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parse(%q) = %v, want a usage error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestPostRetriesA403ABoundedNumberOfTimes(t *testing.T) {
	for name, tc := range map[string]struct {
		codes     []int
		tries     int
		wantSends int
		wantErr   string
	}{
		"taken once the LocalController has the pod": {codes: []int{403, 403}, tries: 5, wantSends: 3},
		"never taken":               {codes: []int{403, 403, 403, 403}, tries: 3, wantSends: 3, wantErr: "after 3 tries: the LocalController at"},
		"refused for another cause": {codes: []int{400}, tries: 5, wantSends: 1, wantErr: `400 Bad Request {"error":"not from the worker"}`},
	} {
		t.Run(name, func(t *testing.T) {
			lc, url := startLC(t, tc.codes...)
			p := &Poster{Kube: fake.NewClientset(workerPod("w", "training", "edge-0", podIP)), Tries: tc.tries, Interval: time.Millisecond}
			err := p.Post(t.Context(), url, "ns", "w", []byte(`{}`))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Post: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Post: %v, want an error with %q", err, tc.wantErr)
			}
			if got := len(lc.seen()); got != tc.wantSends {
				t.Errorf("sent %d times, want %d", got, tc.wantSends)
			}
		})
	}
}

func TestPostSaysWhenThisMachineCannotSpeakAsThePod(t *testing.T) {
	lc, url := startLC(t)
	// 192.0.2.1 is TEST-NET-1: no machine's own address.
	p := &Poster{Kube: fake.NewClientset(workerPod("w", "training", "edge-0", "192.0.2.1")), Tries: 5, Interval: time.Millisecond}
	err := p.Post(context.Background(), url, "ns", "w", []byte(`{}`))
	if !errors.Is(err, ErrCannotSpeakAs) || !strings.Contains(err.Error(), "from 192.0.2.1") {
		t.Errorf("Post: %v, want ErrCannotSpeakAs naming the address", err)
	}
	if got := len(lc.seen()); got != 0 {
		t.Errorf("the LocalController got %d requests, want none", got)
	}
}
