package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDirectionOfUnits(t *testing.T) {
	for want, units := range map[direction][]string{
		higherIsBetter: {"objects/s", "pods/s", "reports/s", "requests/s", "writes/s", "ratio", "workers"},
		lowerIsBetter:  {"ms", "s", "MiB", "KiB", "CPU-s", "CPU", "messages", "upserts"},
		unknown:        {"furlongs", ""},
	} {
		for _, unit := range units {
			if got := directionOf(unit); got != want {
				t.Errorf("directionOf(%q) = %v, want %v", unit, got, want)
			}
		}
	}
}

// Every unit the bench emits has a direction, so a new one is decided here
// rather than silently never marked.
func TestEveryUnitOfTheBenchHasADirection(t *testing.T) {
	files, err := filepath.Glob("../../test/bench/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bench sources at ../../test/bench: %v", err)
	}
	unitRE := regexp.MustCompile(`Unit:\s*"([^"]*)"`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range unitRE.FindAllStringSubmatch(string(data), -1) {
			seen++
			if directionOf(m[1]) == unknown {
				t.Errorf("%s: unit %q has no direction: add it to directionOf", f, m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no Unit: in test/bench: the pattern is stale")
	}
}

func TestWorseOnlyBeyondTheRunsSpread(t *testing.T) {
	for name, tc := range map[string]struct {
		row  row
		want bool
	}{
		// The means (80 and 69) are 14 % apart, but the head's best run
		// (70) is within 10 % of the base's worst (60): noise, not a mark.
		"rate within the spread though its mean is 14 % lower": {
			row{Name: "GlobalManager: pods+services created", Unit: "objects/s", Base: []float64{100, 60}, Head: []float64{70, 68}}, false},
		"rate worse beyond the spread": {
			row{Name: "GlobalManager: pods+services created", Unit: "objects/s", Base: []float64{100, 95}, Head: []float64{85, 80}}, true},
		"rate 10 % lower exactly": {
			row{Name: "rate", Unit: "objects/s", Base: []float64{100}, Head: []float64{90}}, false},
		"ratio worse": {
			row{Name: "GlobalManager rate / ceiling", Unit: "ratio", Base: []float64{0.8, 0.9}, Head: []float64{0.6, 0.7}}, true},
		"latency within the spread though its mean is 30 % higher": {
			row{Name: "self-heal latency p99", Unit: "ms", Base: []float64{100, 200}, Head: []float64{190, 200}}, false},
		"latency worse beyond the spread": {
			row{Name: "self-heal latency p99", Unit: "ms", Base: []float64{100, 110}, Head: []float64{130, 125}}, true},
		"memory better": {
			row{Name: "GlobalManager resident memory", Unit: "MiB", Base: []float64{120, 125}, Head: []float64{90, 95}}, false},
		"messages from none": {
			row{Name: "edge: object messages sent while idle", Unit: "messages", Base: []float64{0, 0}, Head: []float64{3, 5}}, true},
		"unknown unit": {
			row{Name: "x", Unit: "furlongs", Base: []float64{1}, Head: []float64{100}}, false},
		"reference ceiling": {
			row{Name: "ceiling: pods+services created", Unit: "objects/s", Base: []float64{100}, Head: []float64{50}}, false},
		"edge's reference ceiling": {
			row{Name: "edge: ceiling: job status writes", Unit: "writes/s", Base: []float64{100}, Head: []float64{50}}, false},
		"head only": {
			row{Name: "new", Unit: "ms", Head: []float64{100}}, false},
		"base only": {
			row{Name: "old", Unit: "ms", Base: []float64{100}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.row.worse(); got != tc.want {
				t.Errorf("worse() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompareLinesUpRowsAndShowsMissingOnes(t *testing.T) {
	r := func(name string, v float64, unit string) result { return result{Name: name, Value: v, Unit: unit} }
	base := [][]result{
		{r("create", 60, "objects/s"), r("gone", 5, "ms"), r("memory", 100, "MiB")},
		{r("create", 80, "objects/s"), r("memory", 110, "MiB")}, // a run without "gone"
	}
	head := [][]result{
		{r("create", 70, "objects/s"), r("memory", 105, "MiB"), r("new", 7, "ms")},
		{r("create", 70, "objects/s"), r("memory", 105, "MiB"), r("new", 9, "ms")},
	}
	rows := compare(base, head)
	wantRows := []row{
		{Name: "create", Unit: "objects/s", Base: []float64{60, 80}, Head: []float64{70, 70}},
		{Name: "gone", Unit: "ms", Base: []float64{5}},
		{Name: "memory", Unit: "MiB", Base: []float64{100, 110}, Head: []float64{105, 105}},
		{Name: "new", Unit: "ms", Head: []float64{7, 9}},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Fatalf("compare (-want,+got):\n%s", diff)
	}
	var got strings.Builder
	if err := printTable(&got, rows); err != nil {
		t.Fatal(err)
	}
	gotCells := cellsOf(rows)
	wantCells := [][6]string{
		{"create", "objects/s ↑", "60, 80", "70, 70", "1.00", ""},
		{"gone", "ms ↓", "5", "—", "—", ""},
		{"memory", "MiB ↓", "100, 110", "105, 105", "1.00", ""},
		{"new", "ms ↓", "—", "7, 9", "—", ""},
	}
	if diff := cmp.Diff(wantCells, gotCells); diff != "" {
		t.Errorf("cells (-want,+got):\n%s", diff)
	}
	if !strings.Contains(got.String(), "HEAD/BASE") || strings.Count(got.String(), "\n") != 5 {
		t.Errorf("printTable printed\n%s\nwant a header and 4 rows", got.String())
	}
}

func TestMarkdownTable(t *testing.T) {
	rows := []row{
		{Name: "GlobalManager rate / ceiling", Unit: "ratio", Base: []float64{0.8, 0.9}, Head: []float64{0.6, 0.65}},
		{Name: "a | b", Unit: "furlongs", Base: []float64{2}, Head: []float64{3}},
		{Name: "new", Unit: "ms", Head: []float64{7}},
	}
	var got strings.Builder
	markdownTable(&got, "a35cead", "d351a7d + changes", rows)
	want := `| measure | unit | base a35cead | head d351a7d + changes | head/base | |
|---|---|--:|--:|--:|:-:|
| GlobalManager rate / ceiling | ratio ↑ | 0.8, 0.9 | 0.6, 0.65 | 0.74 | ! |
| a \| b | furlongs | 2 | 3 | 1.50 |  |
| new | ms ↓ | — | 7 | — |  |
`
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("markdown (-want,+got):\n%s", diff)
	}
}

func TestReadResultsOfABenchJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "globalmanager.json")
	data := `{"time": "2026-11-26T16:58:41Z", "results": [{"name": "GlobalManager resident memory", "value": 45.85, "unit": "MiB", "goal": "< 150"}]}`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []result{{Name: "GlobalManager resident memory", Value: 45.85, Unit: "MiB", Goal: "< 150"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readResults (-want,+got):\n%s", diff)
	}
}
