package dashboard

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// jsHarness loads app.js into a context of its own, with no DOM (its
// functions that build none run), and prints as JSON the value of each
// expression of the cases it is given.
const jsHarness = `
const vm = require('vm');
const ctx = { window: { addEventListener() {} }, console };
vm.createContext(ctx);
vm.runInContext(process.argv[1], ctx, { filename: 'app.js' });
const out = {};
for (const [name, expr] of Object.entries(JSON.parse(process.argv[2]))) out[name] = vm.runInContext(expr, ctx);
process.stdout.write(JSON.stringify(out));
`

// evalPage is the value of each of exprs (JavaScript, by case name) in
// app.js's scope, as JSON; the test skips without node.
func evalPage(t *testing.T, exprs map[string]string) map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH: the page's logic tests are skipped")
	}
	script, err := web.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), node, "-e", jsHarness, string(script), string(cases)).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %s: %v", out, err)
	}
	return got
}

// checkPage checks each case's expression against its want.
func checkPage(t *testing.T, cases map[string]struct {
	expr string
	want any
}) {
	t.Helper()
	exprs, want := map[string]string{}, map[string]any{}
	for name, tc := range cases {
		exprs[name] = tc.expr
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, evalPage(t, exprs)); diff != "" {
		t.Errorf("the page's logic (-want,+got):\n%s", diff)
	}
}

// A cloud node has no edge link: the fleet says "-" for its link and last
// heard, as kubectl nereid nodes does, not that an edge node never
// connected.
func TestTheFleetShowsNoLinkForACloudNodeAsTheCLIDoes(t *testing.T) {
	const now = `new Date('2026-01-01T00:01:00Z')`
	checkPage(t, map[string]struct {
		expr string
		want any
	}{
		"a cloud node's link":          {expr: `linkText({ name: 'cloud-0', link: '' })`, want: "-"},
		"an edge node never connected": {expr: `linkText({ name: 'edge-2', link: 'unknown', edge: true })`, want: "unknown"},
		"a connected node's link":      {expr: `linkText({ link: 'connected', edge: true })`, want: "connected"},
		"never heard":                  {expr: `ago(undefined, ` + now + `)`, want: "-"},
		"heard 30s ago":                {expr: `ago('2026-01-01T00:00:30Z', ` + now + `)`, want: "30s ago"},
	})
}

// The fleet names a node's running workers, a few at most, and counts
// those that ended: the finished pods a learning cycle keeps (about 40 on
// cloud-0 after the demos) pushed the edge rows off the screen.
func TestTheFleetCountsEndedWorkersAndNamesAFew(t *testing.T) {
	checkPage(t, map[string]struct {
		expr string
		want any
	}{
		"none":        {expr: `workerLines({})`, want: []any{}},
		"two running": {expr: `workerLines({ workers: ['d/a', 'd/b'] })`, want: []any{"d/a", "d/b"}},
		"ended only":  {expr: `workerLines({ ended: 40 })`, want: []any{"40 ended"}},
		"seven running, 40 ended": {expr: `workerLines({ workers: ['d/1', 'd/2', 'd/3', 'd/4', 'd/5', 'd/6', 'd/7'], ended: 40 })`,
			want: []any{"d/1", "d/2", "d/3", "d/4", "d/5", "+2 more", "40 ended"}},
	})
}

// The outbox's bytes are read in KiB, MiB, GiB, not as raw numbers.
func TestTheFleetShowsTheOutboxInBinaryUnits(t *testing.T) {
	checkPage(t, map[string]struct {
		expr string
		want any
	}{
		"never heard":          {expr: `outboxText('')`, want: "-"},
		"empty":                {expr: `outboxText('0% (0/10000 reports, 0/67108864 bytes)')`, want: "0% (0/10000 reports, 0 B of 64 MiB)"},
		"some":                 {expr: `outboxText('12% (1200/10000 reports, 1536/67108864 bytes)')`, want: "12% (1200/10000 reports, 1.5 KiB of 64 MiB)"},
		"a lot":                {expr: `outboxText('97% (9700/10000 reports, 5368709120/5500000000 bytes)')`, want: "97% (9700/10000 reports, 5 GiB of 5.12 GiB)"},
		"not the Lease's form": {expr: `outboxText('full')`, want: "full"},
	})
}

// A phase's color is its state's: a learning cycle's "Deploy Failed" was
// grey (the class was its stage, Deploy) while a DIJob's Failed was red.
func TestAPhaseIsColoredByItsState(t *testing.T) {
	checkPage(t, map[string]struct {
		expr string
		want any
	}{
		"a DIJob's Failed":        {expr: `phaseClass('Failed')`, want: "phase Failed"},
		"a cycle's Deploy Failed": {expr: `phaseClass('Deploy Failed')`, want: "phase Failed"},
		"a cycle's Train Running": {expr: `phaseClass('Train Running')`, want: "phase Running"},
		"a cycle's Eval Waiting":  {expr: `phaseClass('Eval Waiting')`, want: "phase Waiting"},
		"no phase yet":            {expr: `phaseClass('')`, want: "phase "},
	})
}

// Every state a phase ends in has a color: Failed and Unavailable red,
// Succeeded, Running, Completed and Available green, the waits yellow.
func TestEveryStateHasAColor(t *testing.T) {
	css, err := web.ReadFile("web/style.css")
	if err != nil {
		t.Fatal(err)
	}
	for color, states := range map[string][]string{
		"#fbd9d9": {"Failed", "Unavailable"},
		"#d9f2dd": {"Succeeded", "Running", "Completed", "Available"},
		"#fff1c9": {"Pending", "Created", "Starting", "Waiting"},
	} {
		for _, st := range states {
			rule := regexp.MustCompile(`(?m)^[^{]*\.phase\.` + st + `\b[^{]*\{ background: ` + color)
			if !rule.Match(css) {
				t.Errorf("style.css colors no .phase.%s %s", st, color)
			}
		}
	}
}

// The page says which namespace it shows: the dashboard reads kubectl's
// namespace unless -A, and did not say so.
func TestThePageSaysWhichNamespaceItShows(t *testing.T) {
	checkPage(t, map[string]struct {
		expr string
		want any
	}{
		"one namespace":          {expr: `scopeText({ namespace: 'demo' })`, want: "namespace demo"},
		"every namespace":        {expr: `scopeText({ namespace: '' })`, want: "every namespace"},
		"one namespace's hint":   {expr: `scopeHint({ namespace: 'demo' })`, want: "Jobs, workers and Datasets of namespace demo only; the nodes are the cluster's. kubectl nereid dashboard -A shows every namespace."},
		"every namespace's hint": {expr: `scopeHint({})`, want: "Jobs, workers and Datasets of every namespace; the nodes are the cluster's."},
	})
}
