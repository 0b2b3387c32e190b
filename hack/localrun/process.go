package localrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClusterMarker is the environment variable that marks a process as belonging
// to the local control plane of an out dir (its value): hack/lib/process.sh
// sets it on every process it starts, checks it before it believes a pid file
// (a pid may have been reused), and hack/local-down.sh stops every process
// that carries it.
const ClusterMarker = "NEREID_LOCAL_CLUSTER"

// Process is one of Nereid's processes (a GlobalManager, a LocalController)
// that this program starts, its output appended to a log file.
type Process struct {
	Name    string
	Bin     string
	Args    []string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	// starts counts the starts, so that a reading of the metrics knows
	// which process it was of.
	starts int
}

// NewProcess describes a process to start; its output goes to logPath.
func NewProcess(name, bin, logPath string, args ...string) *Process {
	return &Process{Name: name, Bin: bin, Args: args, LogPath: logPath}
}

// Start starts the process (again, after it ended) as this program's own: in
// a process group of its own, so that a signal to it reaches nothing else,
// and killed when this program dies, so that a test that panics leaves
// nothing running.
func (p *Process) Start() error {
	return p.start(&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}, nil)
}

// StartDetached starts the process to outlive this program, as
// hack/lib/process.sh starts the local control plane's: in a session of its
// own (a Ctrl-C in the terminal does not reach it), marked as outDir's
// (ClusterMarker) and recorded in outDir/pids/<name>.pid, so that
// hack/local-down.sh stops it with the rest.
func (p *Process) StartDetached(outDir string) error {
	pidFile := filepath.Join(outDir, "pids", p.Name+".pid")
	if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
		return err
	}
	if err := p.start(&syscall.SysProcAttr{Setsid: true}, []string{ClusterMarker + "=" + outDir}); err != nil {
		return err
	}
	return os.WriteFile(pidFile, []byte(strconv.Itoa(p.Pid())+"\n"), 0o644)
}

func (p *Process) start(attr *syscall.SysProcAttr, env []string) error {
	if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the log of %s: %w", p.Name, err)
	}
	// The child holds its own copy of the descriptor.
	defer log.Close()
	// A restart appends: a header tells the runs apart, as hack/lib/process.sh's do.
	fmt.Fprintf(log, "=== %s starting %s: %s %s\n", time.Now().UTC().Format(time.RFC3339), p.Name, p.Bin, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = attr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	p.starts++
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Pid is the process's id while it runs.
func (p *Process) Pid() int {
	return p.cmd.Process.Pid
}

// Starts is how many times the process was started.
func (p *Process) Starts() int {
	return p.starts
}

// Signal sends sig and waits up to wait for the process to exit, killing it
// then.
func (p *Process) Signal(sig syscall.Signal, wait time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of %v", p.Name, wait, sig)
	}
}

// Wait waits up to timeout for the process to exit by itself and returns its
// exit code; exited is false when it still runs.
func (p *Process) Wait(timeout time.Duration) (code int, exited bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// WaitReady polls ready until it holds, for at most timeout. It fails as
// soon as the process exits, and after timeout; what says what is awaited,
// for the error.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, what string, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before %s", p.Name, p.cmd.ProcessState, what)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (waiting for %s)", p.Name, timeout, what)
		case <-tick.C:
		}
	}
}

// Log returns what the process wrote so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Flag is the value the process was given for --name, the last one when
// it was given several (as the flag package reads them); "" if none.
func (p *Process) Flag(name string) string {
	var value string
	for i, a := range p.Args {
		switch {
		case a == "--"+name && i+1 < len(p.Args):
			value = p.Args[i+1]
		case strings.HasPrefix(a, "--"+name+"="):
			value = strings.TrimPrefix(a, "--"+name+"=")
		}
	}
	return value
}

// Tail returns the last n lines of the file at path (an error's text when
// it cannot be read).
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "") + "\n"
}

// Running says whether the process whose pid the file pidFile holds is
// alive and was started for outDir (it carries ClusterMarker), as
// hack/lib/process.sh's nereid::process::running checks it: a pid file may
// name a pid that another process took since.
func Running(pidFile, outDir string) bool {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis; a zombie is gone.
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(env), "\x00"), ClusterMarker+"="+outDir)
}
