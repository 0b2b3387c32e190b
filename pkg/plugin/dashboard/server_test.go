package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// fixture is a snapshot, rounds and events with every field set.
func fixture() *fixedSource {
	heard := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	end := heard.Add(time.Minute)
	return &fixedSource{
		snapshot: &view.Snapshot{
			Taken: heard.Add(2 * time.Second),
			Nodes: []view.Node{{Name: "edge-0", Link: "connected", LastHeard: &heard, Outbox: "0", Ready: "True", Edge: true, Objects: 2,
				Workers: []string{"demo/fl-train-0"}, Jobs: []string{"FederatedLearningJob/demo/fl"}}},
			Jobs: []view.Job{{Kind: "FederatedLearningJob", Namespace: "demo", Name: "fl", Created: heard, Phase: "Running", Progress: "round 3 (slowest 2)",
				Conditions: []view.Condition{{Type: "Admitted", Status: "True", Reason: "Fits", Message: "m", Since: &heard}},
				Waiting:    "2 cpu", Nodes: []string{"edge-0"},
				Replicas: []view.Replica{{Task: "learner", Node: "edge-0", Running: 1, Pending: 2, Ended: 3}},
				Stages:   []view.Stage{{Round: 1, Stage: "train", State: "Completed", Start: heard, End: &end}}}},
			Notes: []string{"LifelongLearningJobs: forbidden."},
		},
		rounds: &view.Rounds{Kind: "FederatedLearningJob", Namespace: "demo", Name: "fl", Metrics: []string{"accuracy"},
			Points: []view.Point{{Node: "edge-0", Round: 3, Stage: "train", State: "running", Time: &heard, Metrics: map[string]float64{"accuracy": 0.75}}}},
		events: []Event{{Type: "Normal", Reason: "Created", Message: "created pod", From: "nereid", Count: 2, Last: heard}},
	}
}

// getJSON gets path with the token and decodes its JSON into v.
func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	resp := do(t, "GET", base+path, bearer(testToken))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s %s, want 200 application/json", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	checkSecurityHeaders(t, resp)
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func TestTheEndpointsAnswerTheSourcesValues(t *testing.T) {
	src := fixture()
	base := serve(t, src)

	var snapshot view.Snapshot
	getJSON(t, base, "/api/snapshot", &snapshot)
	if diff := cmp.Diff(*src.snapshot, snapshot); diff != "" {
		t.Errorf("/api/snapshot (-want,+got):\n%s", diff)
	}
	var rounds view.Rounds
	getJSON(t, base, "/api/rounds?kind=FederatedLearningJob&namespace=demo&name=fl", &rounds)
	if diff := cmp.Diff(*src.rounds, rounds); diff != "" {
		t.Errorf("/api/rounds (-want,+got):\n%s", diff)
	}
	var events []Event
	getJSON(t, base, "/api/events?kind=DIJob&namespace=demo&name=fl", &events)
	if diff := cmp.Diff(src.events, events); diff != "" {
		t.Errorf("/api/events (-want,+got):\n%s", diff)
	}
	want := []string{"rounds FederatedLearningJob/demo/fl", "events DIJob/demo/fl"}
	if diff := cmp.Diff(want, src.asked); diff != "" {
		t.Errorf("asked (-want,+got):\n%s", diff)
	}
}

func TestTheEndpointsRefuseBadQueriesAndSayTheSourcesError(t *testing.T) {
	cases := map[string]struct {
		path string
		err  error
		want int
	}{
		"rounds of a kind without rounds": {path: "/api/rounds?kind=DIJob&namespace=demo&name=fl", want: http.StatusBadRequest},
		"no kind":                         {path: "/api/events?namespace=demo&name=fl", want: http.StatusBadRequest},
		"a bad namespace":                 {path: "/api/events?kind=DIJob&namespace=Demo!&name=fl", want: http.StatusBadRequest},
		"a long name":                     {path: "/api/events?kind=DIJob&namespace=demo&name=" + strings.Repeat("a", 254), want: http.StatusBadRequest},
		"the cluster refuses":             {path: "/api/snapshot", err: errors.New("forbidden"), want: http.StatusBadGateway},
		"the cluster refuses the events":  {path: "/api/events?kind=DIJob&namespace=demo&name=fl", err: errors.New("forbidden"), want: http.StatusBadGateway},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := fixture()
			src.err = tc.err
			resp := do(t, "GET", serve(t, src)+tc.path, bearer(testToken))
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, body, tc.want)
			}
			if tc.err != nil && !strings.Contains(string(body), tc.err.Error()) {
				t.Errorf("body %q does not say the source's error %q", body, tc.err)
			}
		})
	}
}

// The page, its script and its style hold no cluster data: they are
// served without the token, which the page then sends with its requests.
func TestTheAssetsAreServedWithTheirTypes(t *testing.T) {
	base := serve(t, fixture())
	files := map[string]string{"/": "web/index.html", "/app.js": "web/app.js", "/style.css": "web/style.css"}
	for path, contentType := range assets {
		t.Run(path, func(t *testing.T) {
			resp := do(t, "GET", base+path, nil)
			body, _ := io.ReadAll(resp.Body)
			want, err := web.ReadFile(files[path])
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentType || string(body) != string(want) {
				t.Errorf("GET %s: %d %q, %d bytes; want 200 %q and %s's %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), contentType, files[path], len(want))
			}
			checkSecurityHeaders(t, resp)
		})
	}
}

// The CSP allows no inline script or style, so the page must have none.
func TestThePageHasNoInlineScriptOrStyle(t *testing.T) {
	page, err := web.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`<script\b([^>]*)>([^<]*)</script>`).FindAllSubmatch(page, -1) {
		if !strings.Contains(string(m[1]), "src=") || strings.TrimSpace(string(m[2])) != "" {
			t.Errorf("index.html has an inline script: %q", m[0])
		}
	}
	inline := map[string]*regexp.Regexp{
		"a style element":   regexp.MustCompile(`<style`),
		"a style attribute": regexp.MustCompile(`\sstyle=`),
		"an event handler":  regexp.MustCompile(`\son[a-z]+=`),
	}
	for what, re := range inline {
		if loc := re.FindIndex(page); loc != nil {
			t.Errorf("index.html has %s at byte %d: %q", what, loc[0], page[loc[0]:loc[1]])
		}
	}
	script, err := web.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, unsafe := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "document.write"} {
		if strings.Contains(string(script), unsafe) {
			t.Errorf("app.js uses %s: the cluster's text must never be parsed as markup or code", unsafe)
		}
	}
}

// Serve prints the URL with the token, answers it, and stops when its
// context ends.
func TestServePrintsItsURLAndStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, &cli.Env{Stdout: w, Stderr: w}, netip.MustParseAddrPort("127.0.0.1:0"), fixture(), "demo")
		w.Close()
	}()
	printed := bufio.NewReader(out)
	line, err := printed.ReadString('\n')
	if err != nil {
		t.Fatalf("reading what Serve printed: %v", err)
	}
	// The page shows one namespace's jobs unless -A: it says which.
	scope, err := printed.ReadString('\n')
	if want := "(read-only, for this machine's user; the jobs of namespace demo (-A for every namespace); Ctrl-C stops it)\n"; err != nil || scope != want {
		t.Errorf("Serve's second line %q (%v), want %q", scope, err, want)
	}
	go io.Copy(io.Discard, out)
	m := regexp.MustCompile(`^Open (http://127\.0\.0\.1:\d+/)\?token=([A-Za-z0-9_-]{43})\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("Serve printed %q, want Open http://127.0.0.1:<port>/?token=<43 characters: 32 bytes>", line)
	}
	resp := do(t, "GET", m[1]+"api/snapshot", bearer(m[2]))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET with the printed token: %d, want 200", resp.StatusCode)
	}
	resp = do(t, "GET", m[1]+"api/snapshot", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without the token: %d, want 401", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v, want nil when its context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return 10 s after its context ended")
	}
	if _, err := http.Get(m[1]); err == nil {
		t.Error("the dashboard still answers after Serve returned")
	}
}
