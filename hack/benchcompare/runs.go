package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// side is one of the two checkouts compared: the base's worktree or the
// working tree (the head).
type side struct {
	name  string // base or head: the prefix of its files
	label string // its commit, as the tables head its column
	dir   string // its checkout, where its bench runs (the bench finds its repository from there)
	bin   string // its bench binary
}

// sections are the bench's sections, each with the flag that sets where
// its JSON goes (test/bench, the same since d215729).
var sections = map[string]string{
	"globalmanager": "-out",
	"dijob":         "-dijob-out",
	"edge":          "-edge-out",
	"edge-scale":    "-edge-scale-out",
}

// defaultSections are the sections in the order make bench runs them.
const defaultSections = "globalmanager,dijob,edge,edge-scale"

// buildBench builds s's bench into s.bin once, so that every run of it
// starts at once and runs the same binary.
func buildBench(ctx context.Context, s side) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./test/bench")
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the %s's bench in %s: %w\n%s", s.name, s.dir, err, out)
	}
	return nil
}

// benchArgs are the flags of one run of a section: the user's, then the
// section alone, its JSON to jsonPath and, for edge, without the fleet at
// scale, which is a section of its own here. Ours come last, so they win.
func benchArgs(user []string, section, jsonPath string) []string {
	args := append(append([]string(nil), user...), "-only", section, sections[section], jsonPath)
	if section == "edge" {
		args = append(args, "-edge-scale-nodes", "0")
	}
	return args
}

// runBench runs s's bench once with args in s's checkout, with env added to
// its environment, its output to logPath. A context cancelled on SIGINT or
// SIGTERM sends it SIGTERM and gives it a minute to stop its control plane.
func runBench(ctx context.Context, s side, args, env []string, logPath string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	fmt.Fprintf(log, "%s %q\n(in %s)\n\n", s.bin, args, s.dir)
	return cmd.Run()
}

// runOne runs one section once on one side and says how it went on stdout;
// it returns the path of the JSON written, or an error naming the run and
// its log.
func runOne(ctx context.Context, c *comparison, s side, section string, n int) (string, error) {
	base := filepath.Join(c.outDir, fmt.Sprintf("%s-%s-%d", s.name, section, n))
	jsonPath, logPath := base+".json", base+".log"
	c.count++
	what := fmt.Sprintf("[%d/%d] %s, %s (%s) run %d of %d", c.count, 2*c.runs*len(c.sections), section, s.name, s.label, n, c.runs)
	fmt.Printf("bench-compare: %s: started %s, log %s\n", what, time.Now().Format("15:04:05"), c.rel(logPath))
	start := time.Now()
	err := runBench(ctx, s, benchArgs(c.benchArgs, section, jsonPath), c.env, logPath)
	took := time.Since(start).Round(time.Second)
	if err == nil {
		if _, statErr := os.Stat(jsonPath); statErr != nil {
			err = errors.New("it wrote no JSON")
		}
	}
	if err != nil {
		err = fmt.Errorf("%s failed after %s: %w; log %s, which ends: %s", what, took, err, c.rel(logPath), lastLine(logPath))
		fmt.Printf("bench-compare: %v\n", err)
		return "", err
	}
	fmt.Printf("bench-compare: %s: done in %s\n", what, took)
	return jsonPath, nil
}

// lastLine is the last line of a log that is not blank, the bench's error
// when it failed, cut to 300 bytes.
func lastLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	last := lines[len(lines)-1]
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return last
}
