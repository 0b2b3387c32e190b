package localrun

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/internal/testwait"
)

// TestADetachedProcessIsRecordedAsHackLibProcessShRecordsOne checks what
// hack/local-down.sh relies on to stop a process localrun started: its pid
// file, the out dir's mark in its environment, and its own session.
func TestADetachedProcessIsRecordedAsHackLibProcessShRecordsOne(t *testing.T) {
	out := t.TempDir()
	p := NewProcess("sleeper", "/bin/sleep", filepath.Join(out, "logs", "sleeper.log"), "30")
	if err := p.StartDetached(out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Signal(syscall.SIGKILL, 5*time.Second) })

	pid, err := os.ReadFile(filepath.Join(out, "pids", "sleeper.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(pid)); got != strconv.Itoa(p.Pid()) {
		t.Errorf("pid file says %s, the process is %d", got, p.Pid())
	}
	// /proc/<pid>/environ can read empty for a moment after Start returns
	// (seen once in a fresh-machine run): Go's vfork parent resumes once
	// the child's exec has replaced its memory, which may be before the
	// kernel has recorded where the new environment lies.
	var environ []byte
	testwait.Eventually(t, 5*time.Second, "the process's environment in /proc", func(context.Context) (bool, error) {
		environ, err = os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
		return err != nil || len(environ) > 0, err
	})
	if !strings.Contains("\x00"+string(environ)+"\x00", "\x00"+ClusterMarker+"="+out+"\x00") {
		t.Errorf("the environment lacks %s=%s", ClusterMarker, out)
	}
	// /proc/<pid>/stat: pid (comm) state ppid pgrp session ...
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 4 || fields[3] != strconv.Itoa(p.Pid()) {
		t.Errorf("session %v, want its own, %d", fields, p.Pid())
	}
	if log := p.Log(); !strings.Contains(log, "starting sleeper: /bin/sleep 30") {
		t.Errorf("the log does not say what started:\n%s", log)
	}
}

func TestWaitReadyFailsAtOnceWhenTheProcessExits(t *testing.T) {
	p := NewProcess("false", "/bin/false", filepath.Join(t.TempDir(), "false.log"))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := p.WaitReady(context.Background(), time.Minute, "nothing", func(context.Context) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "false exited") {
		t.Fatalf("WaitReady: %v, want an error saying the process exited", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("WaitReady took %s to see the process exit", waited)
	}
}

func TestFlagReadsTheLastValueGiven(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"none":              {args: []string{"--namespace", "x"}, want: ""},
		"separate value":    {args: []string{"--edge-address", "a:1"}, want: "a:1"},
		"with =":            {args: []string{"--edge-address=a:2"}, want: "a:2"},
		"the last one wins": {args: []string{"--edge-address=a:1", "--edge-address", "a:3"}, want: "a:3"},
		"another flag":      {args: []string{"--edge-address-x=a:1"}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := NewProcess("p", "", "", tc.args...).Flag("edge-address"); got != tc.want {
				t.Errorf("Flag = %q, want %q", got, tc.want)
			}
		})
	}
}
