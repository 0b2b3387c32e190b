package framework

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/hack/localrun"
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

// Process is a Nereid process a test started; it dies with the test binary.
type Process struct {
	*localrun.Process
}

// NewProcess describes a process to start with Start; its output goes to logPath.
func NewProcess(name, bin, logPath string, args ...string) *Process {
	return &Process{localrun.NewProcess(name, bin, logPath, args...)}
}

// DIJobConversion is the flag that has a GlobalManager serve the DIJob
// CRD's conversion webhook on a free loopback port and point the CRD at it
// (a URL), as the local run does. StartGlobalManager serves none by
// default: the cluster has one CRD, and the tests' GlobalManagers would take
// it from one another.
const DIJobConversion = "--dijob-conversion-address=127.0.0.1:0"

// StartGlobalManager runs a real GlobalManager process against the test
// cluster, managing only namespace, without leader election (each test runs
// its own). extra flags are appended. It runs as the chart's ServiceAccount,
// with the chart's permissions (GlobalManagerKubeconfig), namespace standing
// for its own namespace.
func StartGlobalManager(t testing.TB, namespace string, extra ...string) *Process {
	t.Helper()
	return startGlobalManager(t, localrun.GlobalManager{
		Kubeconfig: GlobalManagerKubeconfig(t, namespace), Namespace: namespace,
		HealthAddress: "127.0.0.1:0", Verbosity: 2, Extra: extra,
	})
}

func startGlobalManager(t testing.TB, gm localrun.GlobalManager) *Process {
	t.Helper()
	p := NewProcess("globalmanager", Binary(t, "globalmanager"), filepath.Join(t.TempDir(), "globalmanager.log"), gm.Args()...)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("last lines of the GlobalManager's log (%s):\n%s", p.LogPath, localrun.Tail(p.LogPath, 40))
		}
	})
	return p
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

// HealthAddress is where a GlobalManager serves /healthz, /readyz and
// /metrics, as the last start in its log says; "" until one has said.
func (p *Process) HealthAddress() string {
	return p.loggedAddress("Serving health and metrics")
}

// V1ServerAddress is where a GlobalManager serves the DIJob v1 replicas
// server, as the last start in its log says; "" until one has said.
func (p *Process) V1ServerAddress() string {
	return p.loggedAddress("Serving the DI v1 replicas server")
}

// loggedAddress is the address of the last log line of msg.
func (p *Process) loggedAddress(msg string) string {
	var addr string
	for _, line := range strings.Split(p.Log(), "\n") {
		if _, after, ok := strings.Cut(line, `"`+msg+`" address="`); ok {
			addr, _, _ = strings.Cut(after, `"`)
		}
	}
	return addr
}
