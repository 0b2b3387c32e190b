package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/hack/localrun"
)

// The chart's names, as build/deploy/nereid.yaml (the chart rendered with its
// defaults) has them.
const (
	// SystemNamespace is the namespace the plain manifests install into.
	SystemNamespace = localrun.SystemNamespace
	// GlobalManagerServiceAccount is the GlobalManager's ServiceAccount, in
	// SystemNamespace.
	GlobalManagerServiceAccount = localrun.GlobalManagerServiceAccount
)

// OwnOwnerLabelPolicy labels the namespace of a test that installs a release
// of its own, with its own GlobalManager: the policy keeping the owner label
// that the tests' GlobalManager identity brings (for the GlobalManager in
// SystemNamespace) leaves that namespace to the release's policy.
const OwnOwnerLabelPolicy = "nereid-test/own-owner-label-policy"

// fieldManager applies what the tests make as their owner.
const fieldManager = "nereid-test"

// PlainManifests is the chart rendered with its default values.
func PlainManifests() string {
	return filepath.Join(RepoRoot(), "build", "deploy", "nereid.yaml")
}

var globalManagerIdentity struct {
	once       sync.Once
	identity   *localrun.GlobalManagerIdentity
	kubeconfig string
	err        error
}

// GlobalManagerKubeconfig is a kubeconfig of the chart's GlobalManager
// ServiceAccount, with the chart's permissions (localrun.GlobalManagerIdentity,
// as the local run's GlobalManager has them): its ServiceAccount, ClusterRole
// and Role with their bindings, applied from the plain manifests (or the chart
// rendered with WithChartValues) once per run, and a token minted for the
// ServiceAccount. The Role (what the GlobalManager may do in its own
// namespace) is also applied, with its binding, in namespace, which tests use
// as the GlobalManager's --edge-namespace. A permission the chart lacks makes
// the GlobalManager fail as it would on a cluster.
func GlobalManagerKubeconfig(t testing.TB, namespace string) string {
	t.Helper()
	id := &globalManagerIdentity
	id.once.Do(func() {
		source := PlainManifests()
		if len(chartValues) > 0 {
			source = RenderChart(t, SystemNamespace, chartValues...)
		}
		id.identity = localrun.NewGlobalManagerIdentity(ReadManifests(t, source))
		for _, obj := range id.identity.Objects {
			if obj.GetKind() == "ValidatingAdmissionPolicyBinding" {
				// A test that installs a release of its own brings its own policy.
				err := unstructured.SetNestedField(obj.Object, map[string]any{"matchExpressions": []any{
					map[string]any{"key": OwnOwnerLabelPolicy, "operator": "DoesNotExist"},
				}}, "spec", "matchResources", "namespaceSelector")
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		id.kubeconfig, id.err = mintGlobalManagerKubeconfig(t.Context(), KubeClient(t), source, id.identity)
	})
	if id.err != nil {
		t.Fatal(id.err)
	}
	if id.kubeconfig == "" {
		t.Fatal("the GlobalManager's identity could not be made; the first test that asked for it says why")
	}
	if err := applyRoleIn(t.Context(), id.identity, namespace); err != nil {
		t.Fatal(err)
	}
	return id.kubeconfig
}

// NewGlobalManagerKubeconfig is GlobalManagerKubeconfig for programs that are
// not tests (the bench), of the plain manifests' identity: it applies the
// identity and mints a token each time it is called, so that a program that
// starts a fresh control plane gets a kubeconfig that works on it.
func NewGlobalManagerKubeconfig(ctx context.Context, namespace string) (string, error) {
	source := PlainManifests()
	rendered, err := localrun.ReadManifests(source)
	if err != nil {
		return "", err
	}
	kube, err := kubernetes.NewForConfig(RESTConfig())
	if err != nil {
		return "", err
	}
	id := localrun.NewGlobalManagerIdentity(rendered)
	kubeconfig, err := mintGlobalManagerKubeconfig(ctx, kube, source, id)
	if err != nil {
		return "", err
	}
	return kubeconfig, applyRoleIn(ctx, id, namespace)
}

// applyRoleIn applies the GlobalManager's Role in namespace, unless that is
// SystemNamespace, where the identity has it.
func applyRoleIn(ctx context.Context, id *localrun.GlobalManagerIdentity, namespace string) error {
	if namespace == SystemNamespace {
		return nil
	}
	role := id.RoleIn(namespace)
	if err := localrun.Apply(ctx, RESTConfig(), fieldManager, role); err != nil {
		return fmt.Errorf("applying the GlobalManager's Role in %s: %w", namespace, err)
	}
	return waitForRole(ctx, namespace, role)
}

// waitForRole waits until the API server's authorizer grants the
// GlobalManager's ServiceAccount the first rule of the Role just applied
// in namespace: its RBAC cache follows the Role and RoleBinding by watch,
// and a GlobalManager started before it has them is refused at once
// (likelier while many tests run at once).
func waitForRole(ctx context.Context, namespace string, objs []*unstructured.Unstructured) error {
	var rule map[string]any
	for _, obj := range objs {
		if rules, _, _ := unstructured.NestedSlice(obj.Object, "rules"); obj.GetKind() == "Role" && len(rules) > 0 {
			rule, _ = rules[0].(map[string]any)
		}
	}
	first := func(field string) string {
		values, _, _ := unstructured.NestedStringSlice(rule, field)
		if len(values) == 0 {
			return ""
		}
		return values[0]
	}
	if rule == nil {
		return fmt.Errorf("the GlobalManager's Role in %s has no rule", namespace)
	}
	kube, err := kubernetes.NewForConfig(RESTConfig())
	if err != nil {
		return err
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + SystemNamespace + ":" + GlobalManagerServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + SystemNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace,
			Verb: first("verbs"), Group: first("apiGroups"), Resource: first("resources"), Name: first("resourceNames")},
	}}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		last = got.Status.Reason
		return got.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("the GlobalManager's Role in %s not granted yet (%q): %w", namespace, last, err)
	}
	return nil
}

// EnsureSystemNamespace makes SystemNamespace exist, waiting first for one
// being deleted to go. It is made once and stays for the whole run: the
// tests' GlobalManager identity lives in it, so no test deletes it.
func EnsureSystemNamespace(t testing.TB) error {
	return localrun.EnsureNamespace(t.Context(), KubeClient(t), SystemNamespace)
}

func mintGlobalManagerKubeconfig(ctx context.Context, kube kubernetes.Interface, source string, id *localrun.GlobalManagerIdentity) (string, error) {
	// The plain manifests make their namespace; helm template does not.
	if err := localrun.EnsureNamespace(ctx, kube, SystemNamespace); err != nil {
		return "", err
	}
	if err := localrun.Apply(ctx, RESTConfig(), fieldManager, id.Objects); err != nil {
		return "", fmt.Errorf("applying the chart's RBAC from %s: %w", source, err)
	}
	token, err := localrun.GlobalManagerToken(ctx, kube, SystemNamespace, 4*time.Hour)
	if err != nil {
		return "", err
	}
	return WriteTokenKubeconfig(GlobalManagerServiceAccount, token)
}

// WriteTokenKubeconfig writes a kubeconfig of the test cluster that
// authenticates with token, under the control plane's state dir (or a
// temporary one).
func WriteTokenKubeconfig(name, token string) (string, error) {
	dir := OutDir()
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "kubeconfig-"+name)
	return path, localrun.WriteTokenKubeconfig(path, RESTConfig(), name, token)
}
