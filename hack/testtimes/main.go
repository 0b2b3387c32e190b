// Command testtimes reads `go test -json` from stdin and prints, as Markdown
// tables, the slowest top-level tests and every package's wall time, so that
// two runs of the suite (before and after a change) can be set side by side:
//
//	go test -count=1 -json ./test/... | go run ./hack/testtimes -top 15
//
// A test's time is its own (the "elapsed" of its pass, fail or skip event);
// parallel tests overlap, so their sum exceeds the package's wall time.
// Subtests are counted in their parent.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a `go test -json` line (test2json's TestEvent) read here.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// timing is one test's or one package's time and how it ended.
type timing struct {
	Package, Test string
	Seconds       float64
	Action        string
}

// read collects the ended top-level tests and packages of a `go test -json` stream.
func read(r io.Reader) (tests, packages []timing, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line of build output, not an event
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		t := timing{Package: e.Package, Test: e.Test, Seconds: e.Elapsed, Action: e.Action}
		switch {
		case e.Test == "":
			packages = append(packages, t)
		case !strings.Contains(e.Test, "/"):
			tests = append(tests, t)
		}
	}
	return tests, packages, sc.Err()
}

// slowest sorts ts by time, longest first, and keeps at most top.
func slowest(ts []timing, top int) []timing {
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b timing) int { return cmp.Compare(b.Seconds, a.Seconds) })
	if top > 0 && len(ts) > top {
		ts = ts[:top]
	}
	return ts
}

// shortPackage drops the module's path from a package's.
func shortPackage(p string) string {
	return strings.TrimPrefix(p, "github.com/nereid-ml/nereid/")
}

// write prints the tables.
func write(w io.Writer, tests, packages []timing, top int) {
	fmt.Fprintf(w, "| # | test | package | s |\n|---|---|---|---|\n")
	for i, t := range slowest(tests, top) {
		mark := ""
		if t.Action != "pass" {
			mark = " (" + t.Action + ")"
		}
		fmt.Fprintf(w, "| %d | %s%s | %s | %.1f |\n", i+1, t.Test, mark, shortPackage(t.Package), t.Seconds)
	}
	var sum float64
	for _, t := range tests {
		sum += t.Seconds
	}
	fmt.Fprintf(w, "\n%d top-level tests, %.0f s of test time in all.\n\n", len(tests), sum)
	fmt.Fprintf(w, "| package | wall s | result |\n|---|---|---|\n")
	for _, p := range slowest(packages, 0) {
		if p.Seconds >= 1 {
			fmt.Fprintf(w, "| %s | %.1f | %s |\n", shortPackage(p.Package), p.Seconds, p.Action)
		}
	}
}

func main() {
	top := flag.Int("top", 15, "How many of the slowest top-level tests to print (0: all).")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go test -json ... | go run ./hack/testtimes [-top N]\n\n"+
			"Prints the slowest top-level tests and each package's wall time (packages of at least 1 s) as Markdown tables.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	tests, packages, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	if len(tests)+len(packages) == 0 {
		fmt.Fprintln(os.Stderr, "testtimes: no test events on stdin: pipe in the output of go test -json")
		os.Exit(1)
	}
	write(os.Stdout, tests, packages, *top)
}
