package dashboard

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// movingSource is a federated learning job whose every node reports a new
// round each time its rounds are read.
type movingSource struct {
	*fixedSource
	nodes int
	reads atomic.Int32
}

func (s *movingSource) Rounds(_ context.Context, kind, namespace, name string) (*view.Rounds, error) {
	round := s.reads.Add(1)
	r := &view.Rounds{Kind: kind, Namespace: namespace, Name: name, Metrics: []string{"accuracy"}}
	for i := range s.nodes {
		r.Points = append(r.Points, view.Point{Node: fmt.Sprintf("edge-%03d", i), Round: round, Metrics: map[string]float64{"accuracy": 0.5}})
	}
	return r, nil
}

// The page keeps the points it has seen of a federated learning job (its
// status keeps only each node's last), but not without end: a page left
// open for hours on a job of many nodes, or on a worker that reports
// made-up rounds, would redraw ever more points every 2 seconds until the
// plot's Math.min(...) overflows the stack (at about 125,000 points).
func TestThePageKeepsABoundedNumberOfRoundPoints(t *testing.T) {
	chromium := chromiumPath(t)
	const nodes = 250
	maxGone := maxGone(t)
	src := &movingSource{fixedSource: fixture(), nodes: nodes}
	base := serve(t, src)
	// Virtual time: chromium runs the page's polls (every 2 s) at once.
	cmd := exec.CommandContext(t.Context(), chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=21000", "--dump-dom",
		base+"/?token="+testToken+"#/job/FederatedLearningJob/demo/fl")
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	reads := int(src.reads.Load())
	if reads*nodes <= maxGone+nodes {
		t.Fatalf("the page read the rounds %d times: too few to see more than %d points", reads, maxGone+nodes)
	}
	circles := regexp.MustCompile(`<circle [^>]*data-round="(\d+)"`).FindAllStringSubmatch(string(dom), -1)
	if len(circles) != maxGone+nodes {
		t.Errorf("after %d reads of %d nodes the plot has %d points, want %d: the %d in the status and the last %d seen", reads, nodes, len(circles), maxGone+nodes, nodes, maxGone)
	}
	for _, c := range circles {
		if c[1] == "1" {
			t.Errorf("the plot still has the first round's points: the oldest seen go first")
			break
		}
	}
}

// maxGone is app.js's MAX_GONE.
func maxGone(t *testing.T) int {
	t.Helper()
	script, err := web.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const MAX_GONE = (\d+);`).FindSubmatch(script)
	if m == nil {
		t.Fatal("app.js has no const MAX_GONE = <number>;")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// chromiumPath is chromium's path; the test skips when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the page's browser tests are skipped")
	return ""
}

// The page keeps the printed URL's token for its other tabs and reloads,
// but only once the dashboard took it: a link of another site to the page
// with another token (its port can be guessed) changes nothing for them.
func TestAnotherTokenInALinkDoesNotReplaceTheKeptOne(t *testing.T) {
	chromium := chromiumPath(t)
	base := serve(t, fixture())
	profile := t.TempDir()
	open := func(url string) string {
		t.Helper()
		dom, err := exec.CommandContext(t.Context(), chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--user-data-dir="+profile, "--virtual-time-budget=3000", "--dump-dom", url).Output()
		if err != nil {
			t.Fatalf("chromium --dump-dom %s: %v", url, err)
		}
		return string(dom)
	}
	read := regexp.MustCompile(`<p id="status" class="status">Read `)
	shown := regexp.MustCompile(`<p id="error"[^>]*>[^<]*`)
	if dom := open(base + "/?token=" + testToken + "#/fleet"); !read.MatchString(dom) {
		t.Fatalf("the printed URL: the page read nothing: %s", shown.FindString(dom))
	}
	open(base + "/?token=not-" + testToken + "#/fleet")
	if dom := open(base + "/#/jobs"); !read.MatchString(dom) {
		t.Errorf("the page without a token in its URL, after a link with another token, read nothing: %s", shown.FindString(dom))
	}
}
