package localrun

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/test/framework"
)

// noChromium is what the browser tests say when they cannot run. go test
// shows a passing package's output only with -v, so the Makefile's
// test-integration target prints it too.
const noChromium = "dashboard browser tests skipped: no chromium on PATH; apt-get install chromium"

// The demos' jobs, as examples/ names them.
const (
	demoNamespace = "demo"
	flJob         = "surface-defect-detection"
	ilJob         = "helmet-detection-demo"
	diJob         = "cartpole-dqn"
)

// TestDashboardShowsTheDemosAsTheClusterHasThem runs `kubectl nereid
// dashboard` on the local run's kubeconfig, runs the federated learning,
// incremental learning (three rounds) and DIJob demos, makes a job that waits for what it
// names, and opens each page in headless chromium:
// what the page shows after its polls are the cluster's facts, read here
// with the clientsets. Each page's screenshot is saved under
// _output/dashboard-screenshots/.
func TestDashboardShowsTheDemosAsTheClusterHasThem(t *testing.T) {
	chromium := chromiumPath(t)
	d := startDashboard(t)

	t.Run("refuses a request without the token or for another host", func(t *testing.T) {
		d.checkRefusals(t)
	})

	runDemo(t, "federatedlearningjob")
	runDemoRounds(t, "incrementallearningjob", 3, 0) // a plot of three rounds
	runDemo(t, "dijob")
	kube := framework.KubeClient(t)
	sedna, err := sednaclient.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	waitingNamespace := createJobThatWaits(t, sedna)
	pages := map[string]struct {
		route string
		check func(ctx context.Context, dom string) string
	}{
		"fleet": {route: "fleet", check: edgeNodesConnected},
		"jobs":  {route: "jobs", check: demoJobsListed},
		"waiting": {route: "waiting", check: func(ctx context.Context, dom string) string {
			return waitingJobShown(ctx, sedna, waitingNamespace, dom)
		}},
		"job-federatedlearningjob": {
			route: "job/FederatedLearningJob/" + demoNamespace + "/" + flJob,
			check: func(ctx context.Context, dom string) string {
				return cmp.Or(flJobShown(ctx, sedna, dom), eventsShown(ctx, kube, "FederatedLearningJob", flJob, dom))
			},
		},
		"job-incrementallearningjob": {
			route: "job/IncrementalLearningJob/" + demoNamespace + "/" + ilJob,
			check: func(ctx context.Context, dom string) string { return ilJobShown(ctx, sedna, dom) },
		},
		"job-dijob": {
			route: "job/DIJob/" + demoNamespace + "/" + diJob,
			check: func(ctx context.Context, dom string) string { return diJobReplicasShown(ctx, kube, dom) },
		},
	}
	for name, p := range pages {
		t.Run(name, func(t *testing.T) {
			b := browser{path: chromium, url: d.url + "#/" + p.route}
			b.waitFor(t, p.check)
			b.screenshot(t, filepath.Join(framework.RepoRoot(), "_output", "dashboard-screenshots", name+".png"))
		})
	}
}

// chromiumPath is chromium's path, or the test skips saying so on stderr
// too.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	fmt.Fprintln(os.Stderr, noChromium)
	t.Skip(noChromium)
	return ""
}

// dashboard is a running kubectl-nereid dashboard.
type dashboard struct {
	// url is the URL it printed, with its token; base is without it.
	url, base, token string
}

// startDashboard builds cmd/kubectl-nereid and starts its dashboard on the
// local run's kubeconfig, every namespace, as make dashboard does, until
// the test ends.
func startDashboard(t *testing.T) *dashboard {
	t.Helper()
	cmd := exec.Command(built(t, "./cmd/kubectl-nereid"), "dashboard", "--kubeconfig", framework.KubeconfigPath(), "--all-namespaces")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ctrl-C: the dashboard stops on its own, and exits 0.
	t.Cleanup(func() {
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Errorf("interrupting kubectl-nereid dashboard: %v", err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("kubectl-nereid dashboard after Ctrl-C: %v, want exit 0", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("kubectl-nereid dashboard still runs 30 s after Ctrl-C")
		}
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case line <- s.Text():
			default:
			}
		}
	}()
	select {
	case l := <-line:
		m := regexp.MustCompile(`^Open (http://127\.0\.0\.1:\d+/)\?token=(\S+)$`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("kubectl-nereid dashboard printed %q, want Open http://127.0.0.1:<port>/?token=<token>", l)
		}
		return &dashboard{url: m[0][len("Open "):], base: m[1], token: m[2]}
	case <-time.After(time.Minute):
		t.Fatal("kubectl-nereid dashboard printed no URL within a minute")
		return nil
	}
}

// checkRefusals asks the running dashboard without the token, and with
// the token for another Host (a DNS name rebound to 127.0.0.1): both are
// refused; with the token it answers.
func (d *dashboard) checkRefusals(t *testing.T) {
	cases := map[string]struct {
		edit func(*http.Request)
		want int
	}{
		"with the token":    {edit: d.withToken, want: http.StatusOK},
		"without the token": {edit: func(*http.Request) {}, want: http.StatusUnauthorized},
		"with the token, another host": {edit: func(r *http.Request) {
			d.withToken(r)
			r.Host = "rebound.example" + r.Host[strings.LastIndex(r.Host, ":"):]
		}, want: http.StatusMisdirectedRequest},
	}
	for name, tc := range cases {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.base+"api/snapshot", nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d (%s), want %d", name, resp.StatusCode, body, tc.want)
		}
	}
}

func (d *dashboard) withToken(r *http.Request) {
	r.Host = strings.TrimPrefix(strings.TrimSuffix(d.base, "/"), "http://")
	r.Header.Set("Authorization", "Bearer "+d.token)
}

// browser opens one page of the dashboard in headless chromium.
type browser struct {
	path, url string
}

// virtualTime is how long the page runs, in chromium's virtual time,
// before chromium dumps or shoots it: the first load and two polls (every
// 2 s); virtual time stands still while a request is out.
const virtualTime = "5000"

func (b browser) args(t *testing.T, extra ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1600", "--virtual-time-budget=" + virtualTime}, append(extra, b.url)...)
}

// waitFor dumps the page's DOM until check finds nothing wrong with it.
func (b browser) waitFor(t *testing.T, check func(ctx context.Context, dom string) string) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("what was wrong with the page's last DOM: %s", last)
		}
	}()
	framework.Eventually(t, 2*time.Minute, "the page "+b.url+" to show the cluster's facts", func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, b.path, b.args(t, "--dump-dom")...).Output()
		if err != nil {
			last = fmt.Sprintf("chromium --dump-dom: %v", err)
			return false, nil
		}
		last = check(ctx, string(out))
		return last == "", nil
	})
}

// screenshot saves the page as a PNG at path.
func (b browser) screenshot(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, b.path, b.args(t, "--screenshot="+path)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", path, err)
	}
	t.Logf("screenshot: %s", path)
}

// element is one element of a dumped DOM: its attributes.
type element map[string]string

var (
	tagRE  = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^\s=>]+(?:="[^"]*")?)*)\s*/?>`)
	attrRE = regexp.MustCompile(`([^\s=>]+)(?:="([^"]*)")?`)
)

// elements are the tag elements of dom whose attribute key is value (any
// when key is "").
func elements(dom, tag, key, value string) []element {
	var found []element
	for _, m := range tagRE.FindAllStringSubmatch(dom, -1) {
		if m[1] != tag {
			continue
		}
		e := element{}
		for _, a := range attrRE.FindAllStringSubmatch(m[2], -1) {
			e[a[1]] = html.UnescapeString(a[2])
		}
		if key == "" || e[key] == value {
			found = append(found, e)
		}
	}
	return found
}

// edgeNodesConnected: the fleet shows edge-0 and edge-1 connected.
func edgeNodesConnected(_ context.Context, dom string) string {
	for _, node := range []string{"edge-0", "edge-1"} {
		rows := elements(dom, "tr", "data-node", node)
		if len(rows) != 1 || rows[0]["data-link"] != "connected" {
			return fmt.Sprintf("the fleet's rows of %s: %v, want one, connected", node, rows)
		}
	}
	return ""
}

// demoJobsListed: the jobs page lists both demos' jobs.
func demoJobsListed(_ context.Context, dom string) string {
	for _, key := range []string{"FederatedLearningJob/" + demoNamespace + "/" + flJob, "IncrementalLearningJob/" + demoNamespace + "/" + ilJob} {
		if len(elements(dom, "tr", "data-job", key)) != 1 {
			return "the jobs page has no row of " + key
		}
	}
	return ""
}

// flJobShown: the job's page says Succeeded, and its plot has a point per
// node and numeric metric of status.edgeNodes, of that node's round and
// value, current.
func flJobShown(ctx context.Context, sedna sednaclient.Interface, dom string) string {
	job, err := sedna.SednaV1alpha1().FederatedLearningJobs(demoNamespace).Get(ctx, flJob, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if job.Status.Phase != sednav1.FLJobSucceeded {
		return fmt.Sprintf("the job is %q, not Succeeded yet", job.Status.Phase)
	}
	if s := elements(dom, "section", "id", "job"); len(s) != 1 || s[0]["data-phase"] != "Succeeded" {
		return fmt.Sprintf("the job's section %v, want data-phase Succeeded", s)
	}
	points := elements(dom, "circle", "class", "point")
	want := 0
	for _, n := range job.Status.EdgeNodes {
		for key, v := range numericMetrics(n.Metrics) {
			want++
			if !hasPoint(points, n.Name, n.Round, key, v) {
				return fmt.Sprintf("no current point of node %s round %d %s=%v among %v", n.Name, n.Round, key, v, points)
			}
		}
	}
	if want == 0 {
		return fmt.Sprintf("status.edgeNodes %+v has no numeric metric: the check would check nothing", job.Status.EdgeNodes)
	}
	return ""
}

// numericMetrics are a report's numbers by name, as `kubectl nereid
// rounds` names them: a number's key, or "<key>.<field>" for a number in
// a JSON object; the round itself and totalRounds are no metric.
func numericMetrics(metrics []sednav1.Metric) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metrics {
		if m.Key == "round" || m.Key == "currentRound" || m.Key == "totalRounds" {
			continue
		}
		if v, err := strconv.ParseFloat(m.Value, 64); err == nil {
			out[m.Key] = v
			continue
		}
		var fields map[string]any
		if json.Unmarshal([]byte(m.Value), &fields) != nil {
			continue
		}
		for f, v := range fields {
			if n, ok := v.(float64); ok {
				out[m.Key+"."+f] = n
			}
		}
	}
	return out
}

func hasPoint(points []element, node string, round int32, metric string, value float64) bool {
	for _, p := range points {
		v, err := strconv.ParseFloat(p["data-value"], 64)
		if err == nil && p["data-node"] == node && p["data-round"] == strconv.Itoa(int(round)) &&
			p["data-metric"] == metric && v == value && p["data-current"] == "true" {
			return true
		}
	}
	return false
}

// ilJobShown: each round of status.history is a row of the page's rounds,
// and each numeric evaluation metric of its model a point of that round
// and value ("<i>:<metric>" when the round trained several models).
func ilJobShown(ctx context.Context, sedna sednaclient.Interface, dom string) string {
	job, err := sedna.SednaV1alpha1().IncrementalLearningJobs(demoNamespace).Get(ctx, ilJob, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if len(job.Status.History) < 3 {
		return fmt.Sprintf("the job has %d finished rounds in status.history, want the demo's 3", len(job.Status.History))
	}
	points := elements(dom, "circle", "class", "point")
	for _, h := range job.Status.History {
		round := strconv.Itoa(int(h.Round))
		if len(elements(dom, "tr", "data-round", round)) == 0 {
			return fmt.Sprintf("no row of history round %d", h.Round)
		}
		for i, m := range h.Models {
			for _, metric := range m.Metrics {
				v, err := strconv.ParseFloat(metric.Value, 64)
				if err != nil {
					continue
				}
				key := metric.Key
				if len(h.Models) > 1 {
					key = strconv.Itoa(i) + ":" + key
				}
				if !slices.ContainsFunc(points, func(p element) bool {
					got, err := strconv.ParseFloat(p["data-value"], 64)
					return err == nil && got == v && p["data-round"] == round && p["data-metric"] == key
				}) {
					return fmt.Sprintf("no point of history round %d %s=%v among %v", h.Round, key, v, points)
				}
			}
		}
	}
	return ""
}

// diJobReplicasShown: the DIJob's page has a row per task and node of its
// pods, with their counts by phase.
func diJobReplicasShown(ctx context.Context, kube kubernetes.Interface, dom string) string {
	pods, err := kube.CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{LabelSelector: dijob.LabelTaskName})
	if err != nil {
		return err.Error()
	}
	want := map[string]string{}
	counts := map[string]*[3]int{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "DIJob" || ref.Name != diJob {
			continue
		}
		key := p.Labels[dijob.LabelTaskName] + " on " + p.Spec.NodeName
		if counts[key] == nil {
			counts[key] = &[3]int{}
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			counts[key][0]++
		case corev1.PodSucceeded, corev1.PodFailed:
			counts[key][2]++
		default:
			counts[key][1]++
		}
	}
	for key, c := range counts {
		want[key] = fmt.Sprintf("running %d, pending %d, ended %d", c[0], c[1], c[2])
	}
	if len(want) == 0 {
		return "the DIJob has no pods: the check would check nothing"
	}
	got := map[string]string{}
	for _, r := range elements(dom, "tr", "", "") {
		if task, ok := r["data-task"]; ok {
			got[task+" on "+r["data-node"]] = fmt.Sprintf("running %s, pending %s, ended %s", r["data-running"], r["data-pending"], r["data-ended"])
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		return "the replicas (-pods,+page):\n" + diff
	}
	return ""
}

// createJobThatWaits creates the federated learning example's job alone
// in a namespace of its own, without the Datasets and the Model it names:
// it waits for them (ReferencesResolved=False). It returns the namespace.
func createJobThatWaits(t *testing.T, sedna sednaclient.Interface) string {
	t.Helper()
	ns := framework.Namespace(t)
	u := framework.ReadManifest(t, filepath.Join(framework.RepoRoot(), "examples", "federatedlearningjob"), "FederatedLearningJob")
	var job sednav1.FederatedLearningJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = ns
	if _, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(), &job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a job that waits: %v", err)
	}
	return ns
}

// waitingJobShown: the waiting page lists the job of createJobThatWaits
// with what its False ReferencesResolved condition says it lacks.
func waitingJobShown(ctx context.Context, sedna sednaclient.Interface, ns, dom string) string {
	job, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var want string
	for _, c := range job.Status.Conditions {
		if c.Type == common.ConditionReferencesResolved && c.Status == corev1.ConditionFalse {
			want = c.Reason + ": " + c.Message
		}
	}
	if want == "" {
		return fmt.Sprintf("the job's conditions %+v: no ReferencesResolved=False yet", job.Status.Conditions)
	}
	key := "FederatedLearningJob/" + ns + "/" + flJob
	rows := elements(dom, "tr", "data-job", key)
	if len(rows) != 1 || rows[0]["data-waiting"] != want {
		return fmt.Sprintf("the waiting page's rows of %s: %v, want one saying %q", key, rows, want)
	}
	return ""
}

// eventsShown: the job's page lists the job's events: the reasons the
// clientset lists for it, no other.
func eventsShown(ctx context.Context, kube kubernetes.Interface, kind, name, dom string) string {
	events, err := kube.CoreV1().Events(demoNamespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var want, got []string
	for _, e := range events.Items {
		want = append(want, e.Reason)
	}
	for _, r := range elements(dom, "tr", "", "") {
		if reason, ok := r["data-reason"]; ok {
			got = append(got, reason)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	want, got = slices.Compact(want), slices.Compact(got)
	// The page shows the last 50; the demo's job, run by other tests of
	// the package too, may have had more.
	if len(events.Items) > 50 {
		want = slices.DeleteFunc(want, func(r string) bool { return !slices.Contains(got, r) })
	}
	if len(want) == 0 || !slices.Equal(want, got) {
		return fmt.Sprintf("the page's events' reasons %v, want the job's %v (and some)", got, want)
	}
	return ""
}
