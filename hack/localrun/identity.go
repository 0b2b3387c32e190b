package localrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The chart's names, as build/deploy/nereid.yaml (the chart rendered with its
// defaults, release nereid) has them.
const (
	// SystemNamespace is the chart's namespace in the plain manifests.
	SystemNamespace = "nereid-system"
	// GlobalManagerServiceAccount is the GlobalManager's ServiceAccount, in
	// SystemNamespace.
	GlobalManagerServiceAccount = "nereid-globalmanager"
	// Release is the release the plain manifests are rendered as.
	Release = "nereid"
)

// identityKinds are the kinds of the objects that make the GlobalManager's
// identity and permissions, and the admission policy that keeps its owner
// label for it.
var identityKinds = []string{
	"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// GlobalManagerIdentity is the identity the chart gives the GlobalManager,
// read from its rendering: the ServiceAccount GlobalManagerServiceAccount in
// SystemNamespace, the ClusterRole and the Role (what it may do in its own
// namespace) bound to it, and the admission policy that keeps the owner label
// nereid.io/owner-uid for it. A GlobalManager run with a token of that
// ServiceAccount may do what it may do in a cluster with the chart, and no
// more: a permission the chart lacks makes it fail here as it would there.
type GlobalManagerIdentity struct {
	// Objects make the identity, in the rendering's order.
	Objects []*unstructured.Unstructured
}

// NewGlobalManagerIdentity picks the identity's objects out of the chart's
// rendering.
func NewGlobalManagerIdentity(rendered []*unstructured.Unstructured) *GlobalManagerIdentity {
	id := &GlobalManagerIdentity{}
	for _, obj := range rendered {
		if slices.Contains(identityKinds, obj.GetKind()) {
			id.Objects = append(id.Objects, obj.DeepCopy())
		}
	}
	return id
}

// RoleIn returns copies of the Role and RoleBinding the chart gives the
// GlobalManager in SystemNamespace, for namespace: a GlobalManager keeps its
// edge hub's objects (--edge-namespace) and its leader election Lease in its
// own namespace, which is namespace when it runs anywhere else.
func (id *GlobalManagerIdentity) RoleIn(namespace string) []*unstructured.Unstructured {
	var copies []*unstructured.Unstructured
	for _, obj := range id.Objects {
		if (obj.GetKind() == "Role" || obj.GetKind() == "RoleBinding") && obj.GetNamespace() == SystemNamespace {
			c := obj.DeepCopy()
			c.SetNamespace(namespace)
			// Not the release's: helm leaves it alone.
			c.SetAnnotations(withoutHelmOwnership(c.GetAnnotations()))
			copies = append(copies, c)
		}
	}
	return copies
}

// The annotations by which Helm tells which release owns an object. An object
// that has them, and the label app.kubernetes.io/managed-by=Helm (which the
// rendering has), is taken over by `helm install` of that release instead of
// refused as someone else's.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// OwnedByRelease marks the objects as those of release in namespace, so that
// `helm install <release> --namespace <namespace>` takes them over rather
// than refusing them. Only the objects Helm would make (the ones labelled
// managed-by Helm: not the plain manifests' Namespace) are marked.
func (id *GlobalManagerIdentity) OwnedByRelease(release, namespace string) {
	for _, obj := range id.Objects {
		if obj.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			continue
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[helmReleaseName], a[helmReleaseNamespace] = release, namespace
		obj.SetAnnotations(a)
	}
}

func withoutHelmOwnership(a map[string]string) map[string]string {
	delete(a, helmReleaseName)
	delete(a, helmReleaseNamespace)
	if len(a) == 0 {
		return nil
	}
	return a
}

// GlobalManagerToken mints a token of the chart's GlobalManager
// ServiceAccount, valid for lifetime.
func GlobalManagerToken(ctx context.Context, kube kubernetes.Interface, lifetime time.Duration) (string, error) {
	tr, err := kube.CoreV1().ServiceAccounts(SystemNamespace).CreateToken(ctx, GlobalManagerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting a token of %s/%s: %w", SystemNamespace, GlobalManagerServiceAccount, err)
	}
	return tr.Status.Token, nil
}

// WriteTokenKubeconfig writes to path a kubeconfig of the cluster of cfg
// that authenticates as user with token, and nothing of cfg's own
// credentials.
func WriteTokenKubeconfig(path string, cfg *rest.Config, user, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile,
		CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user}
	kc.CurrentContext = "default"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Apply applies objs in order, server-side as fieldManager, taking over the
// fields others set (kubectl apply --server-side --force-conflicts).
func Apply(ctx context.Context, cfg *rest.Config, fieldManager string, objs []*unstructured.Unstructured) error {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var client dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			client = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, qualifiedName(obj), err)
		}
	}
	return nil
}

func qualifiedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// ReadManifests decodes every object in a YAML file, or in the .yaml files of
// a folder (in name order), as kubectl apply -f would read them.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	} else if info.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.yaml")); err != nil {
			return nil, fmt.Errorf("listing manifests in %s: %w", path, err)
		}
		slices.Sort(files)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		read, err := readManifestFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		objs = append(objs, read...)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no objects in %s", path)
	}
	return objs, nil
}

func readManifestFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue // an empty document, as between two separators
		}
		// Unstructured's own decoding keeps integers int64, as the API server returns them.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}
