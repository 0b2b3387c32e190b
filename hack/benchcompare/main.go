// Command benchcompare runs the bench (test/bench) of a base commit and of
// the working tree, section by section, alternating base and head, and prints
// one table per section with each side's values, the ratio of their means
// and a mark where the working tree is worse beyond the runs' spread
// (make bench-compare BASE=<commit>; docs/benchmark.md, "Comparing against a
// base commit").
//
// The base runs in a detached git worktree under the cache folder
// ($NEREID_CACHE_DIR, else the main working tree's .cache), made once per
// commit and reused; both sides use the tools built there and never rebuild
// them. Each run's JSON and output go to
// _output/bench-compare/<time>/<side>-<section>-<n>.{json,log}, the tables
// to table.md beside them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nereid-ml/nereid/internal/command"
)

type options struct {
	base     string
	sections string
	runs     int
	out      string
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.base, "base", "", "The commit to compare the working tree against (required): a hash, tag, branch or HEAD~1. Its bench runs in a detached worktree of it under the cache folder, made once and reused.")
	fs.StringVar(&o.sections, "sections", defaultSections, "The bench's sections to compare, comma-separated, each run alone (-only): globalmanager, dijob, edge (without the fleet at scale) or edge-scale.")
	fs.IntVar(&o.runs, "runs", 2, "Runs of each section on each side, alternating base and head (base, head, base, head for 2).")
	fs.StringVar(&o.out, "out", "", "Folder of the runs' JSON and logs and of table.md (default _output/bench-compare/<time> in the working tree).")
}

// validate checks the flags and returns the sections to run.
func (o *options) validate() ([]string, error) {
	if o.base == "" {
		return nil, errors.New("-base is required: the commit to compare the working tree against (make bench-compare BASE=<commit>)")
	}
	if o.runs < 1 {
		return nil, fmt.Errorf("-runs %d: want at least 1", o.runs)
	}
	list := command.SplitList(o.sections)
	if len(list) == 0 {
		return nil, errors.New("-sections is empty: want some of " + defaultSections)
	}
	for _, s := range list {
		if _, ok := sections[s]; !ok {
			return nil, fmt.Errorf("-sections: unknown section %q: want some of %s", s, defaultSections)
		}
	}
	return list, nil
}

func main() {
	var o options
	fs := flag.NewFlagSet("benchcompare", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: benchcompare -base <commit> [flags] [-- bench flags]

Runs the bench of a base commit and of the working tree, one section at a time,
alternating base and head, and prints a table per section: the values of each
run, the ratio of the means (head/base) and ! where the working tree is more
than 10 %% worse than the base beyond the runs' spread (make bench-compare).
The arguments after -- go to both sides' bench (say -- -jobs 100 -heal 20).

The base's bench runs in a detached git worktree of it under the cache folder
($NEREID_CACHE_DIR, else the main working tree's .cache), made once per commit
and reused; both sides use the tools built there (make tools) and never rebuild
them. Each run's JSON and output, and the tables as Markdown (table.md), go to
-out. A failed run is named with its log; the others are kept, and the command
exits 1 at the end.

Flags:
`)
		command.PrintFlags(fs)
	}
	o.addFlags(fs)
	_ = command.ParseFlags(fs, os.Args[1:]) // ExitOnError: Parse exits on --help and a bad flag.
	list, err := o.validate()
	if err != nil {
		command.Exit("bench-compare", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := prepare(ctx, o, list, fs.Args())
	if err == nil {
		err = c.run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		stop()
		os.Exit(1)
	}
}

// comparison is one comparison's settings and what it has done so far.
type comparison struct {
	root      string // the working tree
	outDir    string
	cache     string
	sections  []string
	runs      int
	benchArgs []string // for both sides' bench
	env       []string // added to both sides' bench's environment
	base      side
	head      side
	started   time.Time
	count     int // runs started so far
	failed    []error
}

// prepare resolves the base, makes or reuses its worktree, reuses the tools
// and builds both sides' bench.
func prepare(ctx context.Context, o options, list, benchArgs []string) (*comparison, error) {
	root, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	c := &comparison{root: root, sections: list, runs: o.runs, benchArgs: benchArgs, started: time.Now()}
	commit, err := resolveCommit(ctx, root, o.base)
	if err != nil {
		return nil, err
	}
	if c.cache, err = cacheDir(ctx, root); err != nil {
		return nil, err
	}
	// Both sides' control planes run the tools in the cache, as they are:
	// built (or found up to date) here once, by the working tree's recipe.
	c.env = []string{"NEREID_CACHE_DIR=" + c.cache, "NEREID_SKIP_BUILD=1"}
	tools := exec.CommandContext(ctx, "bash", "hack/build-tools.sh")
	tools.Dir, tools.Env, tools.Stdout, tools.Stderr = root, append(os.Environ(), c.env[0]), os.Stdout, os.Stderr
	if err := tools.Run(); err != nil {
		return nil, fmt.Errorf("the tools (make tools): %w", err)
	}
	baseDir, err := baseWorktree(ctx, root, c.cache, commit)
	if err != nil {
		return nil, err
	}
	c.outDir = o.out
	if c.outDir == "" {
		c.outDir = filepath.Join(root, "_output", "bench-compare", c.started.Format("20060102-150405"))
	}
	if c.outDir, err = filepath.Abs(c.outDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.outDir, 0o755); err != nil {
		return nil, err
	}
	headLbl, err := headLabel(ctx, root)
	if err != nil {
		return nil, err
	}
	// Each side's bench binary goes where its GlobalManager's does
	// (_output/bin of its checkout): overwritten, never left to pile up.
	c.base = side{name: "base", label: commit[:7], dir: baseDir, bin: filepath.Join(baseDir, "_output", "bin", "bench")}
	c.head = side{name: "head", label: headLbl, dir: root, bin: filepath.Join(root, "_output", "bin", "bench")}
	fmt.Printf("bench-compare: base %s in %s, head %s in %s; %d run(s) each of %s; bench flags %q; writing to %s\n",
		c.base.label, baseDir, c.head.label, root, c.runs, strings.Join(list, ", "), benchArgs, c.rel(c.outDir))
	for _, s := range []side{c.base, c.head} {
		start := time.Now()
		if err := buildBench(ctx, s); err != nil {
			return nil, err
		}
		fmt.Printf("bench-compare: built the %s's bench in %s\n", s.name, time.Since(start).Round(time.Second))
	}
	return c, nil
}

// sectionRows is one section's comparison.
type sectionRows struct {
	name string
	rows []row
}

// run runs every section, base and head alternating, prints each section's
// table when its runs are done and rewrites table.md, so that an
// interrupted comparison keeps what it measured. It fails when a run failed.
func (c *comparison) run(ctx context.Context) error {
	var done []sectionRows
	for _, section := range c.sections {
		var results [2][][]result // the base's runs, the head's
		for n := 1; n <= c.runs; n++ {
			for k, s := range []side{c.base, c.head} {
				if ctx.Err() != nil {
					break
				}
				path, err := runOne(ctx, c, s, section, n)
				if err == nil {
					var rs []result
					if rs, err = readResults(path); err == nil {
						results[k] = append(results[k], rs)
					}
				}
				if err != nil {
					c.failed = append(c.failed, err)
				}
			}
		}
		done = append(done, sectionRows{section, compare(results[0], results[1])})
		fmt.Printf("\n%s: base %s (%d runs), head %s (%d runs)\n", section, c.base.label, len(results[0]), c.head.label, len(results[1]))
		if len(results[0])+len(results[1]) == 0 {
			fmt.Println("no run of it succeeded")
		} else if err := printTable(os.Stdout, done[len(done)-1].rows); err != nil {
			return err
		}
		fmt.Println()
		if err := c.writeMarkdown(done); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Printf("bench-compare: tables written to %s\n", c.rel(filepath.Join(c.outDir, "table.md")))
	if len(c.failed) > 0 {
		for _, err := range c.failed {
			fmt.Fprintln(os.Stderr, "bench-compare:", err)
		}
		return fmt.Errorf("%d run(s) failed; the tables hold the others", len(c.failed))
	}
	return ctx.Err()
}

// writeMarkdown writes the sections compared so far to table.md, for a note.
func (c *comparison) writeMarkdown(done []sectionRows) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Bench of the working tree (head %s) against base %s, %s: %d run(s) of each section on each side, alternating base and head",
		c.head.label, c.base.label, c.started.Format("2006-01-02 15:04"), c.runs)
	if len(c.benchArgs) > 0 {
		fmt.Fprintf(&b, "; bench flags `%s`", strings.Join(c.benchArgs, " "))
	}
	b.WriteString(". Values are run by run; ↑ higher is better, ↓ lower is better; `!` marks the head more than 10 % worse " +
		"than the base beyond the runs' spread (its best run against the base's worst); a plain client's ceiling or floor is never marked.\n")
	for _, s := range done {
		fmt.Fprintf(&b, "\n#### %s\n\n", s.name)
		if len(s.rows) == 0 {
			b.WriteString("No results: no run of it succeeded.\n")
			continue
		}
		markdownTable(&b, c.base.label, c.head.label, s.rows)
	}
	if len(c.failed) > 0 {
		b.WriteString("\nFailed runs (not in the tables):\n\n")
		for _, err := range c.failed {
			fmt.Fprintf(&b, "- %v\n", err)
		}
	}
	return os.WriteFile(filepath.Join(c.outDir, "table.md"), []byte(b.String()), 0o644)
}

// rel is path relative to the working tree when it is inside it, for
// shorter progress lines.
func (c *comparison) rel(path string) string {
	if r, err := filepath.Rel(c.root, path); err == nil && !slices.Contains(strings.Split(r, string(filepath.Separator)), "..") {
		return r
	}
	return path
}
