// Package printer is how kubectl nereid's commands print what package view
// read: tables as kubectl prints them (text/tabwriter, upper-case headers,
// "-" for nothing, ages as kubectl get's AGE column), or, with -o json, the
// view types themselves as indented JSON, which the dashboard serves too.
package printer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Output is the value of -o/--output: Table ("") or JSON.
type Output string

// The outputs.
const (
	Table Output = ""
	JSON  Output = "json"
)

// AddOutputFlag adds -o/--output to fs.
func AddOutputFlag(fs *flag.FlagSet) *Output {
	o := new(Output)
	set := func(s string) error {
		switch Output(s) {
		case Table, JSON:
			*o = Output(s)
			return nil
		}
		return errors.New("want json (empty prints a table)")
	}
	usage := "Output `format`: json prints what was read as JSON (the dashboard's types); empty prints a table."
	fs.Func("output", usage, set)
	fs.Func("o", "Short for --output `format`.", set)
	return o
}

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// NewTable is a tabwriter laid out as kubectl's tables.
func NewTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}

// Row writes one row of cells, an empty cell as "-".
func Row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// Age is how long before now t was, as kubectl get's AGE column ("45s",
// "5m30s", "2h"); "-" for no time.
func Age(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(*t))
}

// Number prints a metric's value in at most 6 significant digits.
func Number(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}
