package localrun

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/test/framework"
)

// runDemo runs the demo command as `make demo-<example>` does (from the
// repository's root, on the local run's state folder), with one round and no
// pauses, and fails the test with its output if it fails. A learning-cycle
// job checks its train trigger every second instead of the example's 15.
func runDemo(t *testing.T, example string) {
	t.Helper()
	runDemoRounds(t, example, 1, 0)
}

// runDemoRounds is runDemo with as many rounds as asked, pause apart: a
// page polling every 2 s sees each round when pause is longer than that.
func runDemoRounds(t *testing.T, example string, rounds int, pause time.Duration) {
	t.Helper()
	demoBin := built(t, "./hack/demo")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := []string{"-out-dir", framework.OutDir(), "-example", example, "-rounds", strconv.Itoa(rounds), "-pause", pause.String()}
	if example == "incrementallearningjob" || example == "lifelonglearningjob" {
		args = append(args, "-check-period-seconds=1")
	}
	cmd := exec.CommandContext(ctx, demoBin, args...)
	cmd.Dir = framework.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the %s demo: %v\n%s", example, err, out)
	}
	t.Logf("the %s demo:\n%s", example, out)
}

// TestEveryDemoRunsAgain runs each demo twice on the same local run, as a
// user who runs make demo again does: the second run finds the first run's
// job (Succeeded, or where the first run left it) and must start it afresh.
func TestEveryDemoRunsAgain(t *testing.T) {
	for _, example := range []string{"federatedlearningjob", "dijob", "dijob-v1", "incrementallearningjob", "lifelonglearningjob"} {
		t.Run(example, func(t *testing.T) {
			runDemo(t, example)
			runDemo(t, example)
		})
	}
}

// TestREADMEHelmInstallOnTheLocalRun runs the README's helm install command
// for the local run, word for word, on the local run (whose LocalControllers
// have the identities local-up gives them), with the pinned helm the README
// points to; then the local run still works: the federated learning demo runs
// to its end; and helm uninstall removes the release again, and nothing of
// the local run's: the demo runs to its end again (the release and the local
// run's GlobalManager share no cluster-scoped name).
func TestREADMEHelmInstallOnTheLocalRun(t *testing.T) {
	kube := framework.KubeClient(t)
	// The local run's stand-in LocalController DaemonSet is there.
	daemonSets, err := kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var localRun []string
	for _, ds := range daemonSets.Items {
		if ds.Spec.Template.Spec.Containers[0].Image == "nereid/localcontroller:local" {
			localRun = append(localRun, ds.Namespace+"/"+ds.Name)
		}
	}
	if len(localRun) == 0 {
		t.Fatal("the local run has no LocalController DaemonSet: the test would prove nothing")
	}

	args := readmeHelmInstall(t)
	out, err := framework.Helm(t, args...)
	if err != nil {
		t.Fatalf("the README's helm install on the local run (whose LocalControllers' DaemonSet is %v): %v\n%s", localRun, err, out)
	}
	// The chart's default images are not published: its notes say what to set.
	if !strings.Contains(out, "No image is published") || !strings.Contains(out, "make images REGISTRY=<registry> PUSH=1") {
		t.Errorf("helm install's notes do not say the default images are not published, nor how to build yours:\n%s", out)
	}
	ds, err := kube.AppsV1().DaemonSets("nereid-system").Get(t.Context(), "nereid-localcontroller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Annotations["meta.helm.sh/release-name"]; got != "nereid" {
		t.Errorf("nereid-system/nereid-localcontroller belongs to release %q, want nereid", got)
	}

	// The local run's GlobalManager and LocalControllers go on acting
	// beside the chart's objects (whose Pods kwok runs without their images).
	runDemo(t, "federatedlearningjob")

	// And the README's way out.
	if out, err := framework.Helm(t, "uninstall", "nereid", "--namespace", "nereid-system", "--wait", "--timeout=2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	runDemo(t, "federatedlearningjob")
}

// readmeHelmInstall is the README's command that installs the chart on the
// local run (the line starting `helm install nereid ` after a comment line
// that names make local-up), as helm's arguments, with the chart's path made
// absolute.
func readmeHelmInstall(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(framework.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	var previous string
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		comment := previous
		previous = line
		if !strings.HasPrefix(line, "helm install nereid ") || strings.HasSuffix(line, "\\") ||
			!strings.HasPrefix(comment, "#") || !strings.Contains(comment, "make local-up") {
			continue
		}
		args := strings.Fields(line)[1:]
		for i, a := range args {
			if a == "build/charts/nereid" {
				args[i] = framework.ChartDir()
			}
		}
		return args
	}
	t.Fatal("the README has no line `helm install nereid ...` after a comment naming make local-up")
	return nil
}
