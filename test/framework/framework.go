// Package framework runs Nereid's integration tests against a real Kubernetes control
// plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, started
// on loopback by hack/local-up.sh (see docs/local-run.md).
//
// A test package calls Run from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }
//
// and its tests use RESTConfig, KubeClient, Namespace and Kubectl.
//
// Run starts a fresh control plane for the test binary, in its own state dir and port
// block, and stops it afterwards. Set NEREID_TEST_KUBECONFIG to the kubeconfig of a
// running cluster (for instance the one `make local-up` starts, in
// _output/local/kubeconfig) to run the tests against it instead, which saves the few
// seconds of start-up when iterating.
package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/hack/localrun"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
)

// module is the module path that marks the repository root.
const module = "github.com/nereid-ml/nereid"

// TestNamespaceLabel marks the namespaces that Namespace creates, so that leftovers on
// a shared cluster can be found with a label selector.
const TestNamespaceLabel = "nereid.io/test"

// The cluster the tests run against, set once by Run.
var (
	kubeconfigPath string
	outDir         string // empty when the cluster is not ours (NEREID_TEST_KUBECONFIG)
	restConfig     *rest.Config
)

var (
	repoRootOnce sync.Once
	repoRoot     string
	repoRootErr  error
)

// RepoRoot returns the absolute path of the repository: the closest directory, from the
// working directory up, whose go.mod declares module github.com/nereid-ml/nereid.
// `go test` runs a test binary in its package's directory, so this finds it from any
// test. It panics when there is none, as nothing in this package can work then.
func RepoRoot() string {
	repoRootOnce.Do(func() { repoRoot, repoRootErr = findRepoRoot() })
	if repoRootErr != nil {
		panic(repoRootErr)
	}
	return repoRoot
}

func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, module) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the repository root: no go.mod of module %s in the working directory or above", module)
		}
		dir = parent
	}
}

func declaresModule(goMod []byte, path string) bool {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == path
		}
	}
	return false
}

// Run sets up the cluster, runs the tests and tears the cluster down; its result is the
// exit code for os.Exit. Teardown happens however the tests end: on success the state
// dir is deleted; on failure the processes are stopped, the logs are kept in
// <state dir>/logs and their last lines printed, so CI output shows what the control
// plane said. If the test binary dies without reaching teardown (a panic, the -timeout
// of go test, a signal), a watchdog process stops the control plane.
func Run(m *testing.M, opts ...Option) int {
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "framework:", err)
		return 1
	}
	repoRootOnce.Do(func() { repoRoot = root })
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.parallel > 0 {
		if err := defaultParallel(o.parallel); err != nil {
			fmt.Fprintln(os.Stderr, "framework:", err)
			return 1
		}
	}

	if kc := os.Getenv("NEREID_TEST_KUBECONFIG"); kc != "" && !o.ownCluster() {
		err := useCluster(kc)
		if err == nil {
			err = noClusterWideGlobalManager()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "framework: NEREID_TEST_KUBECONFIG=%s: %v\n", kc, err)
			return 1
		}
		return m.Run()
	}

	if o.realNodes > 0 {
		if realNodesSkip = realNodesUnavailable(); realNodesSkip != "" {
			fmt.Fprintf(os.Stderr, "framework: %s: every test here skips\n", realNodesSkip)
			return m.Run()
		}
	}
	if o.ownCluster() && os.Getenv("NEREID_TEST_KUBECONFIG") != "" {
		fmt.Fprintln(os.Stderr, "framework: these tests change the cluster's APIs and need a control plane of their own; NEREID_TEST_KUBECONFIG is not used")
	}
	dir, err := startControlPlane(root, o.env()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "framework:", err)
		return 1
	}
	outDir = dir
	stopWatchdog := startWatchdog(root, dir)

	// An interrupt (Ctrl-C, or a CI runner's TERM) would otherwise end the process
	// without teardown; tear down, then exit as the signal would have.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "framework: %v: stopping the control plane in %s\n", sig, dir)
		teardown(root, dir, false)
		stopWatchdog()
		os.Exit(1)
	}()

	code := 1
	defer func() {
		signal.Stop(sigs)
		teardown(root, dir, code == 0)
		stopWatchdog()
	}()
	if err := useCluster(filepath.Join(dir, "kubeconfig")); err != nil {
		fmt.Fprintln(os.Stderr, "framework:", err)
		return code
	}
	code = m.Run()
	return code
}

// Option changes the control plane that Run starts.
type Option func(*runOptions)

type runOptions struct {
	withoutNereidCRDs bool
	withoutGangAPI    bool
	localRun          bool
	realNodes         int
	parallel          int
}

// ownCluster says whether the options change cluster-wide things, so that the
// tests need a control plane of their own even when NEREID_TEST_KUBECONFIG is
// set.
func (o runOptions) ownCluster() bool {
	return o.withoutNereidCRDs || o.withoutGangAPI || o.localRun || o.realNodes > 0
}

// WithChartValues runs the tests' GlobalManagers with the permissions of the
// chart rendered with these helm arguments (--set ...) instead of its
// defaults (see GlobalManagerKubeconfig).
func WithChartValues(args ...string) Option {
	return func(*runOptions) { chartValues = args }
}

// chartValues are WithChartValues's arguments.
var chartValues []string

func (o runOptions) env() []string {
	var env []string
	if o.withoutNereidCRDs {
		env = append(env, "NEREID_INSTALL_CRDS=0")
	}
	if o.withoutGangAPI {
		env = append(env, "NEREID_GANG_API=0")
	}
	if o.realNodes > 0 {
		env = append(env, fmt.Sprintf("NEREID_REAL_NODES=%d", o.realNodes), "NEREID_REAL_CLOUD_NODES=1",
			"NEREID_CLOUD_NODES=", "NEREID_EDGE_NODES=")
	}
	if o.localRun {
		// After startControlPlane's NEREID_GLOBALMANAGER=0: the last wins.
		env = append(env, "NEREID_GLOBALMANAGER=1")
	}
	return env
}

// Parallel runs up to n of the tests that call t.Parallel() at once, unless go
// test's -parallel says another number. Go's default is GOMAXPROCS, but these
// tests spend nearly all their time waiting for the control plane and their
// GlobalManagers, so more of them than there are cores fit beside each other.
func Parallel(n int) Option {
	return func(o *runOptions) { o.parallel = n }
}

// defaultParallel sets -test.parallel to n when the command line did not.
func defaultParallel(n int) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	return flag.Set("test.parallel", strconv.Itoa(n))
}

// AsLocalRun starts the control plane exactly as `make local-up` does, its
// GlobalManager and a LocalController per edge node included, for tests of
// what the README does on the local run (make demo, helm install onto it).
// Its GlobalManager acts on every namespace, so these tests get a control
// plane of their own, even when NEREID_TEST_KUBECONFIG is set.
func AsLocalRun() Option {
	return func(o *runOptions) { o.localRun = true }
}

// WithoutNereidCRDs starts a control plane without Nereid's CRDs, for tests
// that install other CRDs of the sedna.io group first (Sedna's own, to switch
// from them). Such tests change cluster-wide objects, so they always get a
// control plane of their own, even when NEREID_TEST_KUBECONFIG is set.
func WithoutNereidCRDs() Option {
	return func(o *runOptions) { o.withoutNereidCRDs = true }
}

// WithoutGangAPI starts a control plane as clusters before Kubernetes 1.37 (or
// with the beta off) are: no scheduling.k8s.io/v1beta1 Workload and PodGroup,
// no GangScheduling plugin in the scheduler. Like WithoutNereidCRDs, it always
// gets a control plane of its own.
func WithoutGangAPI() Option {
	return func(o *runOptions) { o.withoutGangAPI = true }
}

// startControlPlane runs hack/local-up.sh with a fresh state dir under _output and
// returns that dir. The port block follows from the dir's path; in the rare case that
// it clashes with something else on the machine, it tries again with another dir.
func startControlPlane(root string, env ...string) (string, error) {
	parent := filepath.Join(root, "_output")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", parent, err)
	}
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	const attempts = 3
	for attempt := 1; ; attempt++ {
		dir, err := os.MkdirTemp(parent, "test-"+name+"-")
		if err != nil {
			return "", fmt.Errorf("creating the state dir: %w", err)
		}
		fmt.Fprintf(os.Stderr, "framework: starting a local control plane in %s\n", dir)
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "hack", "local-up.sh"))
		// Tests start their own GlobalManagers, one per test namespace.
		cmd.Env = append(append(os.Environ(), "NEREID_OUT_DIR="+dir, "NEREID_GLOBALMANAGER=0"), env...)
		cmd.Stdout = os.Stderr
		cmd.Stderr = &teeWriter{w: os.Stderr, also: &stderr}
		start := time.Now()
		err = cmd.Run()
		if err == nil {
			fmt.Fprintf(os.Stderr, "framework: control plane up in %s\n", time.Since(start).Round(100*time.Millisecond))
			return dir, nil
		}
		teardown(root, dir, false)
		if attempt < attempts && strings.Contains(stderr.String(), "is already in use") {
			continue
		}
		return "", fmt.Errorf("hack/local-up.sh failed (%v); its output is above, the logs are in %s", err, filepath.Join(dir, "logs"))
	}
}

// teeWriter copies local-up's messages to the test output and keeps them, to tell a
// port clash from other failures.
type teeWriter struct {
	w    *os.File
	also *bytes.Buffer
}

func (p *teeWriter) Write(b []byte) (int, error) {
	p.also.Write(b)
	return p.w.Write(b)
}

// teardown stops the control plane in dir. On success it deletes dir; otherwise it
// keeps dir/logs, deletes the rest, and prints the end of every log.
func teardown(root, dir string, success bool) {
	args := []string{filepath.Join(root, "hack", "local-down.sh")}
	if success {
		args = append(args, "--purge")
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "NEREID_OUT_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "framework: hack/local-down.sh: %v\n%s", err, out)
	}
	if success {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "logs" {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		fmt.Fprintf(os.Stderr, "--- last lines of %s ---\n%s", l, localrun.Tail(l, 15))
	}
	fmt.Fprintf(os.Stderr, "framework: the control plane's logs are kept in %s\n", filepath.Join(dir, "logs"))
}

// startWatchdog starts a process, in its own session so an interrupt of the test does
// not reach it, that runs hack/local-down.sh once this process is gone. Teardown in Run
// covers every orderly end; the watchdog covers a panic in a test goroutine or go test's
// -timeout, which end the process without running deferred calls. The returned func
// ends the watchdog after an orderly teardown.
func startWatchdog(root, dir string) func() {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" >/dev/null 2>&1`
	cmd := exec.Command("bash", "-c", script, "nereid-test-watchdog",
		strconv.Itoa(os.Getpid()), filepath.Join(root, "hack", "local-down.sh"))
	cmd.Env = append(os.Environ(), "NEREID_OUT_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "framework: starting the teardown watchdog: %v (teardown still runs when the tests end normally)\n", err)
		return func() {}
	}
	// Reap it in the background so that it does not linger as a zombie.
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Kill()
		<-done
	}
}

// useCluster loads the kubeconfig and checks that the cluster answers.
func useCluster(path string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	// Tests create objects in bursts; client-go's default 5 QPS would make them slow.
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client for %s: %w", path, err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("reaching the cluster of %s: %w", path, err)
	}
	kubeconfigPath, restConfig = path, cfg
	return nil
}

// noClusterWideGlobalManager refuses a cluster where a GlobalManager already
// acts (its Lease is renewed): tests start their own, one per namespace, and a
// second one would act on their objects too. It looks at the local run's
// Lease and at the GlobalManager's default one.
func noClusterWideGlobalManager() error {
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	for _, namespace := range []string{localrun.Namespace, "kube-system"} {
		lease, err := client.CoordinationV1().Leases(namespace).Get(context.Background(), localrun.LeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading the GlobalManager's lease: %w", err)
		}
		held := ptrString(lease.Spec.HolderIdentity) != "" && lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil &&
			time.Since(lease.Spec.RenewTime.Time) < time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second
		if held {
			return fmt.Errorf("a GlobalManager runs on this cluster (lease %s/%s held by %s); the tests start their own: bring the cluster up with NEREID_GLOBALMANAGER=0 make local-up",
				namespace, localrun.LeaseName, ptrString(lease.Spec.HolderIdentity))
		}
	}
	return nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustHaveCluster() {
	if restConfig == nil {
		panic("framework: no cluster; call framework.Run from TestMain")
	}
}

// RESTConfig returns a copy of the cluster's client configuration, for building other
// clients (the generated sedna.io clientset, a dynamic client).
func RESTConfig() *rest.Config {
	mustHaveCluster()
	return rest.CopyConfig(restConfig)
}

// KubeconfigPath returns the path of the cluster's admin kubeconfig, for processes a
// test starts (the GlobalManager, a LocalController) and for kubectl.
func KubeconfigPath() string {
	mustHaveCluster()
	return kubeconfigPath
}

// OutDir returns the state dir of the control plane that Run started (its env.sh holds
// the port block; see hack/local-up.sh), or "" when the tests use NEREID_TEST_KUBECONFIG.
func OutDir() string {
	return outDir
}

// KubeClient returns a client of the core Kubernetes APIs.
func KubeClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(RESTConfig())
	if err != nil {
		t.Fatalf("building the Kubernetes client: %v", err)
	}
	return c
}

// SednaClient returns a client of Nereid's sedna.io API.
func SednaClient(t testing.TB) sednaclient.Interface {
	t.Helper()
	c, err := sednaclient.NewForConfig(RESTConfig())
	if err != nil {
		t.Fatalf("building sedna client: %v", err)
	}
	return c
}

// Events are the events of the object uid in namespace ns.
func Events(t testing.TB, ns string, uid types.UID) []corev1.Event {
	t.Helper()
	events, err := KubeClient(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		t.Fatal(err)
	}
	return events.Items
}

// CountEvents counts the events of the object uid with reason whose message
// names name (each as often as it happened).
func CountEvents(t testing.TB, ns string, uid types.UID, reason, name string) int {
	t.Helper()
	n := 0
	for _, e := range Events(t, ns, uid) {
		if e.Reason == reason && strings.Contains(e.Message, name) {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// Namespace creates a namespace for this test alone and deletes it when the test ends.
// Its name is the test's name, lower-cased and cut to fit, plus a random suffix, so
// `kubectl get ns` shows which test made which. It returns once the namespace can take
// pods, that is once its default ServiceAccount exists: until the controller-manager
// creates it, the ServiceAccount admission plugin rejects pods.
func Namespace(t testing.TB) string {
	t.Helper()
	ctx := t.Context()
	client := KubeClient(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   namespaceName(t.Name()),
		Labels: map[string]string{TestNamespaceLabel: "true"},
	}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	// t.Context() is canceled before cleanups run; the deletion must still go out.
	cleanupCtx := context.WithoutCancel(ctx)
	t.Cleanup(func() {
		err := client.CoreV1().Namespaces().Delete(cleanupCtx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	Eventually(t, 30*time.Second, "the default ServiceAccount of namespace "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return ns.Name
}

var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// namespaceName turns a test name into a namespace name: a DNS label (at most 63
// characters of [a-z0-9-]) ending in a random suffix.
func namespaceName(testName string) string {
	const maxPrefix = 63 - 1 - 5 // "-" and the suffix
	base := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > maxPrefix {
		base = strings.TrimRight(base[:maxPrefix], "-")
	}
	if base == "" {
		base = "test"
	}
	return base + "-" + randomSuffix(5)
}

func randomSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // no vowels: no words by accident
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// CacheDir is the built tools' cache: $NEREID_CACHE_DIR, else the
// repository's .cache.
func CacheDir() string {
	if cache := os.Getenv("NEREID_CACHE_DIR"); cache != "" {
		return cache
	}
	return filepath.Join(RepoRoot(), ".cache")
}

// toolsDir is where hack/build-tools.sh puts the tools it builds:
// <CacheDir>/bin.
func toolsDir() string { return filepath.Join(CacheDir(), "bin") }

// kubectlPath prefers the kubectl that hack/build-tools.sh builds at the cluster's
// version, and falls back to the one on PATH.
func kubectlPath() string {
	if p := filepath.Join(toolsDir(), "kubectl"); isExecutable(p) {
		return p
	}
	return "kubectl"
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// Kubectl runs kubectl against the cluster, as a user would, and returns its standard
// output. When kubectl fails, the error holds its exit status and its standard error,
// so a test can check what the user would read:
//
//	out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", path)
func Kubectl(t testing.TB, args ...string) (stdout string, err error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), kubectlPath(), append([]string{"--kubeconfig", KubeconfigPath()}, args...)...)
	return runTool(cmd, "kubectl", args)
}

// runTool runs cmd, a tool named name given args, and returns its standard
// output; when it fails, the error holds its exit status and standard error.
func runTool(cmd *exec.Cmd, name string, args []string) (string, error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return out.String(), fmt.Errorf("%s %s: %w; stderr:\n%s", name, strings.Join(args, " "), err, errOut.String())
		}
		return out.String(), fmt.Errorf("running %s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// StartCluster starts a control plane outside of a test binary (for the
// benchmark command), with env added to hack/local-up.sh's environment: it
// returns the kubeconfig path and a func that stops the control plane,
// keeping its logs when keepLogs is set.
func StartCluster(env ...string) (kubeconfig string, stop func(keepLogs bool), err error) {
	root, err := findRepoRoot()
	if err != nil {
		return "", nil, err
	}
	repoRootOnce.Do(func() { repoRoot = root })
	dir, err := startControlPlane(root, env...)
	if err != nil {
		return "", nil, err
	}
	stopWatchdog := startWatchdog(root, dir)
	outDir = dir
	if err := useCluster(filepath.Join(dir, "kubeconfig")); err != nil {
		teardown(root, dir, false)
		stopWatchdog()
		return "", nil, err
	}
	return kubeconfigPath, func(keepLogs bool) {
		teardown(root, dir, !keepLogs)
		stopWatchdog()
	}, nil
}

// UseCluster points the framework at a running cluster's kubeconfig (for the
// benchmark command).
func UseCluster(kubeconfig string) error {
	root, err := findRepoRoot()
	if err != nil {
		return err
	}
	repoRootOnce.Do(func() { repoRoot = root })
	return useCluster(kubeconfig)
}
