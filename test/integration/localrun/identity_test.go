package localrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/hack/localrun"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/test/framework"
)

// TestTheLocalRunsGlobalManagerHasTheChartsIdentityAndNoMore reads the
// kubeconfig the local run's GlobalManager process was started with: the API
// server takes it for the chart's GlobalManager ServiceAccount, which may
// read the sedna.io objects of every namespace, as the chart's ClusterRole
// grants, and is refused the Secrets of kube-system and the Secrets of its
// own namespace but the edge hub's, which the chart does not grant.
func TestTheLocalRunsGlobalManagerHasTheChartsIdentityAndNoMore(t *testing.T) {
	kubeconfig := runningGlobalManagerFlag(t, "kubeconfig")
	if want := localrun.GlobalManagerKubeconfig(framework.OutDir()); kubeconfig != want {
		t.Errorf("the GlobalManager runs with --kubeconfig=%s, want %s", kubeconfig, want)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)

	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo
	// The chart's ServiceAccount, in the local run's namespace: a release
	// in SystemNamespace has its own (TestREADMEHelmInstallOnTheLocalRun).
	if want := "system:serviceaccount:" + localrun.Namespace + ":" + localrun.GlobalManagerServiceAccount; user.Username != want {
		t.Errorf("the GlobalManager is %s, want %s", user.Username, want)
	}
	if slices.Contains(user.Groups, "system:masters") {
		t.Errorf("the GlobalManager is in system:masters (groups %v)", user.Groups)
	}

	// Granted: the point of the refusals below is RBAC, not a broken credential.
	if _, err := sednaclient.NewForConfigOrDie(cfg).SednaV1alpha1().Models(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("listing the Models of every namespace: %v, want it allowed (the chart's ClusterRole)", err)
	}
	for _, namespace := range []string{"kube-system", localrun.Namespace, localrun.SystemNamespace} {
		_, err := kube.CoreV1().Secrets(namespace).List(t.Context(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("listing the Secrets of %s: %v, want Forbidden (the chart grants only its own Secret's name)", namespace, err)
		}
	}
	if _, err := kube.CoreV1().Secrets(localrun.Namespace).Get(t.Context(), "nereid-edgehub-tls", metav1.GetOptions{}); err != nil {
		t.Errorf("reading the edge hub's Secret in %s: %v, want it allowed (the chart's Role)", localrun.Namespace, err)
	}
}

// runningGlobalManagerFlag is the value of --name on the command line of the
// local run's GlobalManager process, as its pid file names it.
func runningGlobalManagerFlag(t *testing.T, name string) string {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(framework.OutDir(), "pids", "globalmanager.pid"))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "cmdline"))
	if err != nil {
		t.Fatalf("the local run's GlobalManager does not run: %v", err)
	}
	process := localrun.NewProcess("globalmanager", "", "", strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")...)
	value := process.Flag(name)
	if value == "" {
		t.Fatalf("the GlobalManager was given no --%s: %q", name, cmdline)
	}
	return value
}
