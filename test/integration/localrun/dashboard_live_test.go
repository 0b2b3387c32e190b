package localrun

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/test/framework"
)

// liveRounds is how many rounds the federated learning demo plays while
// the page is open, and minLiveRounds how many of them the page must have
// plotted: a round stays in the status only until the next one, pause
// (3 s) apart, so a loaded machine may let a 2-s poll miss one.
const (
	liveRounds    = 4
	minLiveRounds = 3
	livePause     = 3 * time.Second
)

// TestTheDashboardFollowsAFederatedJobAsItProgresses keeps one page of
// `kubectl nereid dashboard`, the federated learning demo's job, open in
// headless chromium while the demo plays four rounds, 3 s apart. The job's
// status keeps only each edge node's last report, so the page has earlier
// rounds only if it kept polling while they were current: afterwards it
// plots, for each edge node, the loss the demo reported in at least three
// rounds, and the last round's points as status.edgeNodes has them. The
// page's screenshot is saved under _output/dashboard-screenshots/.
func TestTheDashboardFollowsAFederatedJobAsItProgresses(t *testing.T) {
	chromium := chromiumPath(t)
	d := startDashboard(t)
	sedna, err := sednaclient.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	page := openPage(t, chromium, d.url+"#/job/FederatedLearningJob/"+demoNamespace+"/"+flJob)
	page.waitFor(t, "the job's page to render a poll", func(_ context.Context, dom string) string {
		if m := elements(dom, "main", "id", "main"); len(m) != 1 || m[0]["data-page"] != "job" {
			return fmt.Sprintf("the page's main %v, want data-page job", m)
		}
		return ""
	})

	runDemoRounds(t, "federatedlearningjob", liveRounds, livePause)
	dom := page.waitFor(t, "the page to have plotted the job's rounds", func(ctx context.Context, dom string) string {
		return cmp.Or(flJobShown(ctx, sedna, dom), lossPlottedEachRound(ctx, sedna, dom))
	})
	for node, rounds := range lossRounds(dom) {
		t.Logf("the page plotted %s's loss in rounds %v of %d", node, rounds, liveRounds)
	}
	page.screenshot(t, filepath.Join(framework.RepoRoot(), "_output", "dashboard-screenshots", "job-federatedlearningjob-live.png"))
}

// lossPlottedEachRound: for each edge node of the job's status, the page
// plots the loss of at least minLiveRounds rounds, each at the value the
// demo reports for its round (1/(round+1)).
func lossPlottedEachRound(ctx context.Context, sedna sednaclient.Interface, dom string) string {
	job, err := sedna.SednaV1alpha1().FederatedLearningJobs(demoNamespace).Get(ctx, flJob, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if len(job.Status.EdgeNodes) == 0 {
		return "the job's status.edgeNodes is empty: the check would check nothing"
	}
	points := elements(dom, "circle", "data-metric", "loss")
	for _, p := range points {
		round, err1 := strconv.Atoi(p["data-round"])
		v, err2 := strconv.ParseFloat(p["data-value"], 64)
		if err1 != nil || err2 != nil || v != 1/float64(round+1) {
			return fmt.Sprintf("a loss point %v, want round r's at 1/(r+1) as the demo reports it", p)
		}
	}
	got := lossRounds(dom)
	for _, n := range job.Status.EdgeNodes {
		if len(got[n.Name]) < minLiveRounds {
			return fmt.Sprintf("node %s's loss is plotted in rounds %v, want at least %d of the demo's %d; the page's loss points: %v",
				n.Name, got[n.Name], minLiveRounds, liveRounds, points)
		}
	}
	return ""
}

// lossRounds are the rounds of the loss points dom plots, by node.
func lossRounds(dom string) map[string][]int {
	out := map[string][]int{}
	for _, p := range elements(dom, "circle", "data-metric", "loss") {
		if round, err := strconv.Atoi(p["data-round"]); err == nil {
			out[p["data-node"]] = append(out[p["data-node"]], round)
		}
	}
	for node, rounds := range out {
		slices.Sort(rounds)
		out[node] = slices.Compact(rounds)
	}
	return out
}

// cdpPage is the one page of a headless chromium the test started, driven
// over the Chrome DevTools Protocol: one command at a time, each answered
// before the next is sent.
type cdpPage struct {
	conn   *websocket.Conn
	lastID int
}

// cdpTimeout bounds the wait for each command's answer.
const cdpTimeout = 30 * time.Second

// openPage starts headless chromium on a user data folder of its own,
// connects to its page and navigates it to url. Chromium and its
// children are killed when the test ends.
func openPage(t *testing.T, chromium, url string) *cdpPage {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(chromium, "--headless", "--remote-debugging-port=0", "--user-data-dir="+dir,
		"--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,1600", "about:blank")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children too are killed as a group
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("chromium's stderr:\n%s", stderr.Bytes()[max(0, stderr.Len()-4096):])
		}
	})

	var port string
	framework.Eventually(t, time.Minute, "chromium to write "+filepath.Join(dir, "DevToolsActivePort"), func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("chromium exited: %v\n%s", waitErr, stderr.Bytes())
		default:
		}
		b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		lines := strings.Split(string(b), "\n")
		if err != nil || len(lines) < 2 { // the port, then the browser's path
			return false, nil
		}
		port = lines[0]
		return true, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), cdpTimeout)
	defer cancel()
	conn, err := dialPage(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &cdpPage{conn: conn}
	res, err := p.call(ctx, "Page.navigate", map[string]any{"url": url})
	if err != nil {
		t.Fatal(err)
	}
	var nav struct{ ErrorText string }
	if err := json.Unmarshal(res, &nav); err != nil || nav.ErrorText != "" {
		t.Fatalf("navigating to %s: %s %v", url, nav.ErrorText, err)
	}
	return p
}

// dialPage connects to the page target of the chromium listening for
// DevTools on port.
func dialPage(ctx context.Context, port string) (*websocket.Conn, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/json/list", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing chromium's targets: %w", err)
	}
	defer resp.Body.Close()
	var targets []struct{ Type, URL, WebSocketDebuggerURL string }
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return nil, fmt.Errorf("decoding chromium's targets: %w", err)
	}
	i := slices.IndexFunc(targets, func(tg struct{ Type, URL, WebSocketDebuggerURL string }) bool { return tg.Type == "page" })
	if i < 0 {
		return nil, fmt.Errorf("chromium's targets %+v have no page", targets)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, targets[i].WebSocketDebuggerURL, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to chromium's page: %w", err)
	}
	return conn, nil
}

// call sends the command method with params and returns the result of
// its answer, skipping the events that come before it; an error chromium
// answers is returned as one. It waits cdpTimeout at most, less if ctx's
// deadline is sooner; after a timeout the connection is unusable.
func (p *cdpPage) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p.lastID++
	id := p.lastID
	deadline := time.Now().Add(cdpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := p.conn.SetWriteDeadline(deadline); err != nil {
		return nil, err
	}
	if err := p.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	if err := p.conn.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	for {
		var m struct {
			ID     int
			Result json.RawMessage
			Error  *struct {
				Code    int
				Message string
			}
		}
		if err := p.conn.ReadJSON(&m); err != nil {
			return nil, fmt.Errorf("reading the answer to %s: %w", method, err)
		}
		switch {
		case m.ID != id: // an event, or nothing of ours
		case m.Error != nil:
			return nil, fmt.Errorf("%s: %s (code %d)", method, m.Error.Message, m.Error.Code)
		default:
			return m.Result, nil
		}
	}
}

// dom is the page's DOM as HTML, as chromium --dump-dom prints it; ""
// while a navigation has none yet.
func (p *cdpPage) dom(ctx context.Context) (string, error) {
	res, err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": `document.documentElement?.outerHTML ?? ""`, "returnByValue": true})
	if err != nil {
		return "", err
	}
	var ev struct {
		Result           struct{ Value string }
		ExceptionDetails json.RawMessage
	}
	if err := json.Unmarshal(res, &ev); err != nil {
		return "", fmt.Errorf("decoding the page's DOM: %w", err)
	}
	if ev.ExceptionDetails != nil {
		return "", fmt.Errorf("reading the page's DOM: %s", ev.ExceptionDetails)
	}
	return ev.Result.Value, nil
}

// waitFor reads the page's DOM until check finds nothing wrong with it,
// two minutes at most, and returns that DOM; failing, it says what check
// found wrong last.
func (p *cdpPage) waitFor(t *testing.T, what string, check func(ctx context.Context, dom string) string) string {
	t.Helper()
	var dom, last string
	defer func() {
		if t.Failed() {
			t.Logf("what was wrong with the page's last DOM: %s", last)
		}
	}()
	framework.Eventually(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
		var err error
		if dom, err = p.dom(ctx); err != nil {
			return false, err
		}
		last = check(ctx, dom)
		return last == "", nil
	})
	return dom
}

// screenshot saves the page, as it is now, as a PNG at path.
func (p *cdpPage) screenshot(t *testing.T, path string) {
	t.Helper()
	res, err := p.call(t.Context(), "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	if err != nil {
		t.Fatal(err)
	}
	var shot struct{ Data string }
	if err := json.Unmarshal(res, &shot); err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) == 0 {
		t.Fatalf("the screenshot is no base64 PNG (%d bytes): %v", len(png), err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
