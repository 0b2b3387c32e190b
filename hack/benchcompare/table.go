package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// result is one row of a bench section's JSON, as test/bench writes it (the
// same shape since d215729).
type result struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Goal  string  `json:"goal,omitempty"`
	Note  string  `json:"note,omitempty"`
}

// readResults reads the rows of one bench run's JSON file.
func readResults(path string) ([]result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var run struct {
		Results []result `json:"results"`
	}
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return run.Results, nil
}

// direction says which way a unit is better.
type direction int

const (
	unknown direction = iota
	higherIsBetter
	lowerIsBetter
)

// lowerIsBetterUnits are the units of times, memory, CPU and of things that
// should not happen at all (the edge section's idle messages and the upserts
// sent back per report, whose goal is 0).
var lowerIsBetterUnits = map[string]bool{
	"ms": true, "s": true, "KiB": true, "MiB": true, "GiB": true,
	"CPU-s": true, "CPU": true, "messages": true, "upserts": true,
}

// directionOf is the direction of a unit: every rate (…/s), a ratio (to a
// ceiling or floor measured in the same run) and the sustained workers are
// higher-is-better; lowerIsBetterUnits lower-is-better; any other unknown.
func directionOf(unit string) direction {
	switch {
	case lowerIsBetterUnits[unit]:
		return lowerIsBetter
	case unit == "ratio" || unit == "workers" || strings.HasSuffix(unit, "/s"):
		return higherIsBetter
	}
	return unknown
}

// isReference reports whether a row measures a reference (a plain client's
// ceiling or floor), not Nereid: the API server's pace during that run, which
// the working tree does not set, so it is never marked. Its ratio still says
// whether the two sides ran on an equally busy machine.
func isReference(name string) bool {
	name = strings.TrimPrefix(name, "edge: ")
	return strings.HasPrefix(name, "ceiling:") || strings.HasPrefix(name, "floor:")
}

// row is one measure of a section across the base's and the head's runs.
type row struct {
	Name, Unit string
	Base, Head []float64 // one value per run that has the row
}

// compare lines up the rows of the base's runs and the head's runs of one
// section by name and unit, in the order they first appear (the base's
// first, then rows only the head has).
func compare(base, head [][]result) []row {
	var rows []*row
	index := map[[2]string]*row{}
	add := func(runs [][]result, side func(*row) *[]float64) {
		for _, run := range runs {
			for _, r := range run {
				key := [2]string{r.Name, r.Unit}
				rw := index[key]
				if rw == nil {
					rw = &row{Name: r.Name, Unit: r.Unit}
					index[key] = rw
					rows = append(rows, rw)
				}
				*side(rw) = append(*side(rw), r.Value)
			}
		}
	}
	add(base, func(r *row) *[]float64 { return &r.Base })
	add(head, func(r *row) *[]float64 { return &r.Head })
	out := make([]row, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out
}

// ratio is the head's mean over the base's, and false when either side has
// no value or the base's mean is 0.
func (r row) ratio() (float64, bool) {
	if len(r.Base) == 0 || len(r.Head) == 0 {
		return 0, false
	}
	b := mean(r.Base)
	if b == 0 {
		return 0, false
	}
	return mean(r.Head) / b, true
}

// worse reports whether the head is more than 10 % worse than the base
// beyond the runs' spread: its best run worse by 10 % than the base's worst.
// A reference row, a row of an unknown unit or of one side only never is.
func (r row) worse() bool {
	if len(r.Base) == 0 || len(r.Head) == 0 || isReference(r.Name) {
		return false
	}
	switch directionOf(r.Unit) {
	case higherIsBetter:
		return slicesMax(r.Head) < 0.9*slicesMin(r.Base)
	case lowerIsBetter:
		return slicesMin(r.Head) > 1.1*slicesMax(r.Base)
	}
	return false
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func slicesMin(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func slicesMax(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// missing is what a side without the row shows.
const missing = "—"

// cells are a row's columns as printed: measure, unit (with ↑ or ↓ when
// its direction is known), the base's values, the head's, head/base, mark.
func (r row) cells() [6]string {
	unit := r.Unit
	switch directionOf(r.Unit) {
	case higherIsBetter:
		unit += " ↑"
	case lowerIsBetter:
		unit += " ↓"
	}
	ratio := missing
	if q, ok := r.ratio(); ok {
		ratio = fmt.Sprintf("%.2f", q)
	}
	mark := ""
	if r.worse() {
		mark = "!"
	}
	return [6]string{r.Name, unit, values(r.Base), values(r.Head), ratio, mark}
}

// values lists one side's values, run by run.
func values(v []float64) string {
	if len(v) == 0 {
		return missing
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

var header = [6]string{"MEASURE", "UNIT", "BASE", "HEAD", "HEAD/BASE", ""}

// printTable prints a section's rows as a terminal table.
func printTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range append([][6]string{header}, cellsOf(rows)...) {
		fmt.Fprintln(tw, strings.Join(c[:], "\t"))
	}
	return tw.Flush()
}

// markdownTable writes a section's rows as a Markdown table, its columns
// headed by what each side is (base and head name their commits).
func markdownTable(w io.Writer, base, head string, rows []row) {
	fmt.Fprintf(w, "| measure | unit | base %s | head %s | head/base | |\n", base, head)
	fmt.Fprintln(w, "|---|---|--:|--:|--:|:-:|")
	for _, c := range cellsOf(rows) {
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(c[:], " | "))
	}
}

func cellsOf(rows []row) [][6]string {
	out := make([][6]string, len(rows))
	for i, r := range rows {
		out[i] = r.cells()
	}
	return out
}
