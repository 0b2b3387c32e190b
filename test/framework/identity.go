package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The chart's names, as build/deploy/nereid.yaml (the chart rendered with its
// defaults) has them.
const (
	// SystemNamespace is the namespace the plain manifests install into.
	SystemNamespace = "nereid-system"
	// GlobalManagerServiceAccount is the GlobalManager's ServiceAccount, in
	// SystemNamespace.
	GlobalManagerServiceAccount = "nereid-globalmanager"
)

// OwnOwnerLabelPolicy labels the namespace of a test that installs a release
// of its own, with its own GlobalManager: the policy keeping the owner label
// that the tests' GlobalManager identity brings (for the GlobalManager in
// SystemNamespace) leaves that namespace to the release's policy.
const OwnOwnerLabelPolicy = "nereid-test/own-owner-label-policy"

// PlainManifests is the chart rendered with its default values.
func PlainManifests() string {
	return filepath.Join(RepoRoot(), "build", "deploy", "nereid.yaml")
}

// rbacKinds are the objects of the plain manifests that make the
// GlobalManager's identity and permissions, and the admission policy that
// keeps its owner label for it (so every test runs under it, as a cluster
// with the chart does).
var rbacKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

var globalManagerIdentity struct {
	once       sync.Once
	kubeconfig string
	// ownRole are the chart's Role and RoleBinding in SystemNamespace, to
	// copy into each test namespace.
	ownRole []*unstructured.Unstructured
	err     error
}

// GlobalManagerKubeconfig is a kubeconfig of the chart's GlobalManager
// ServiceAccount, with the chart's permissions: its ServiceAccount, ClusterRole
// and Role with their bindings, applied from the plain manifests (or the chart
// rendered with WithChartValues) once per run,
// and a token minted for the ServiceAccount. The Role (what the GlobalManager
// may do in its own namespace) is also applied, with its binding, in
// namespace, which tests use as the GlobalManager's --edge-namespace. A
// permission the chart lacks makes the GlobalManager fail as it would on a
// cluster.
func GlobalManagerKubeconfig(t testing.TB, namespace string) string {
	t.Helper()
	id := &globalManagerIdentity
	id.once.Do(func() {
		source := PlainManifests()
		if len(chartValues) > 0 {
			source = RenderChart(t, SystemNamespace, chartValues...)
		}
		var all []*unstructured.Unstructured
		for _, obj := range ReadManifests(t, source) {
			if !rbacKinds[obj.GetKind()] {
				continue
			}
			if obj.GetKind() == "ValidatingAdmissionPolicyBinding" {
				// A test that installs a release of its own brings its own policy.
				err := unstructured.SetNestedField(obj.Object, map[string]any{"matchExpressions": []any{
					map[string]any{"key": OwnOwnerLabelPolicy, "operator": "DoesNotExist"},
				}}, "spec", "matchResources", "namespaceSelector")
				if err != nil {
					t.Fatal(err)
				}
			}
			all = append(all, obj)
			if (obj.GetKind() == "Role" || obj.GetKind() == "RoleBinding") && obj.GetNamespace() == SystemNamespace {
				id.ownRole = append(id.ownRole, obj)
			}
		}
		id.kubeconfig, id.err = mintGlobalManagerKubeconfig(t, source, all)
	})
	if id.err != nil {
		t.Fatal(id.err)
	}
	if id.kubeconfig == "" {
		t.Fatal("the GlobalManager's identity could not be made; the first test that asked for it says why")
	}
	if namespace != SystemNamespace && len(id.ownRole) > 0 {
		copies := make([]*unstructured.Unstructured, len(id.ownRole))
		for i, obj := range id.ownRole {
			copies[i] = obj.DeepCopy()
			copies[i].SetNamespace(namespace)
		}
		if err := applyObjects(t, copies); err != nil {
			t.Fatalf("applying the GlobalManager's Role in %s: %v", namespace, err)
		}
	}
	return id.kubeconfig
}

// EnsureSystemNamespace makes SystemNamespace exist, waiting first for one
// being deleted to go. It is made once and stays for the whole run: the
// tests' GlobalManager identity lives in it, so no test deletes it.
func EnsureSystemNamespace(t testing.TB) error {
	client := KubeClient(t).CoreV1().Namespaces()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := client.Get(ctx, SystemNamespace, metav1.GetOptions{})
		switch {
		case err == nil:
			return ns.DeletionTimestamp == nil, nil
		case !apierrors.IsNotFound(err):
			return false, err
		}
		_, err = client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		return fmt.Errorf("making namespace %s (waiting for one being deleted to go): %w", SystemNamespace, err)
	}
	return nil
}

func mintGlobalManagerKubeconfig(t testing.TB, source string, objs []*unstructured.Unstructured) (string, error) {
	// The plain manifests make their namespace; helm template does not.
	if err := EnsureSystemNamespace(t); err != nil {
		return "", err
	}
	if err := applyObjects(t, objs); err != nil {
		return "", fmt.Errorf("applying the chart's RBAC from %s: %w", source, err)
	}
	expiry := int64(4 * 3600)
	tr, err := KubeClient(t).CoreV1().ServiceAccounts(SystemNamespace).CreateToken(t.Context(), GlobalManagerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting a token of %s/%s: %w", SystemNamespace, GlobalManagerServiceAccount, err)
	}
	return WriteTokenKubeconfig(GlobalManagerServiceAccount, tr.Status.Token)
}

// WriteTokenKubeconfig writes a kubeconfig of the test cluster that
// authenticates with token, under the control plane's state dir (or a
// temporary one).
func WriteTokenKubeconfig(name, token string) (string, error) {
	cfg := RESTConfig()
	dir := OutDir()
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "kubeconfig-"+name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile,
		CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name}
	kc.CurrentContext = "default"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// applyObjects applies objs with kubectl, server-side, as their owner would.
func applyObjects(t testing.TB, objs []*unstructured.Unstructured) error {
	var doc []byte
	for _, obj := range objs {
		y, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		doc = append(append(doc, "---\n"...), y...)
	}
	f := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(f, doc, 0o600); err != nil {
		return err
	}
	_, err := Kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager=nereid-test", "-f", f)
	return err
}
