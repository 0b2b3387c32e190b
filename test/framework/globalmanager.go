package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binary returns the path of one of Nereid's commands (globalmanager,
// localcontroller), built once per test binary from the working tree.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := BuildBinary(name)
	if err != nil {
		t.Fatalf("building Nereid's commands: %v", err)
	}
	return path
}

// BuildBinary is Binary for programs that are not tests.
func BuildBinary(name string) (string, error) {
	buildOnce.Do(func() {
		// The same folder as `make build`: overwritten, never left to pile up.
		dir := filepath.Join(RepoRoot(), "_output", "bin")
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/...: %w\n%s", err, out)
			return
		}
		binDir = dir
	})
	if buildErr != nil {
		return "", buildErr
	}
	return filepath.Join(binDir, name), nil
}

// Process is a Nereid process a test started; it is stopped when the test ends.
type Process struct {
	Name    string
	args    []string
	bin     string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	// starts counts the starts, so a reading of the metrics knows which
	// process it was of.
	starts int
}

// StartGlobalManager runs a real GlobalManager process against the test
// cluster, managing only namespace, without leader election (each test runs
// its own). extra flags are appended. It runs as the chart's ServiceAccount,
// with the chart's permissions (GlobalManagerKubeconfig), namespace standing
// for its own namespace.
func StartGlobalManager(t testing.TB, namespace string, extra ...string) *Process {
	t.Helper()
	args := append([]string{
		"--kubeconfig", GlobalManagerKubeconfig(t, namespace),
		"--namespace", namespace,
		"--leader-elect=false",
		"--health-address", "127.0.0.1:0",
		"-v", "2",
	}, extra...)
	p := NewProcess("globalmanager", Binary(t, "globalmanager"), filepath.Join(t.TempDir(), "globalmanager.log"), args...)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("last lines of the GlobalManager's log (%s):\n%s", p.logPath, tail(p.logPath, 40))
		}
	})
	return p
}

// NewProcess describes a process to start with Start; its output goes to logPath.
func NewProcess(name, bin, logPath string, args ...string) *Process {
	return &Process{Name: name, bin: bin, args: args, logPath: logPath}
}

// Pid is the process's id while it runs.
func (p *Process) Pid() int {
	return p.cmd.Process.Pid
}

// Start starts the process (again, after Kill or Stop), appending to its log.
func (p *Process) Start() error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a kill reaches nothing else of the test's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	p.starts++
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return nil
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.Signal(syscall.SIGKILL, 10*time.Second); err != nil {
		t.Error(err)
	}
}

// Stop ends the process with SIGTERM, as a rollout would, and waits for it.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Error(err)
	}
}

// Signal sends sig and waits up to wait for the process to exit, killing it then.
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

// Log returns what the process wrote so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// HealthAddress is where a GlobalManager serves /healthz, /readyz and
// /metrics, as the last start in its log says; "" until one has said.
func (p *Process) HealthAddress() string {
	var addr string
	for _, line := range strings.Split(p.Log(), "\n") {
		if _, after, ok := strings.Cut(line, `"Serving health and metrics" address="`); ok {
			addr, _, _ = strings.Cut(after, `"`)
		}
	}
	return addr
}
