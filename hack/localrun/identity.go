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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		// Of the namespaces, the GlobalManager's own: DI-orchestrator's
		// di-system, where the chart makes di-server, is not its identity.
		if obj.GetKind() == "Namespace" && obj.GetName() != SystemNamespace {
			continue
		}
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
			copies = append(copies, c)
		}
	}
	return copies
}

// In returns the identity as a release of the chart in namespace would have
// it, instead of SystemNamespace: its ServiceAccount and Role in namespace,
// its cluster-scoped objects (ClusterRole, ClusterRoleBinding and the
// admission policy, which the chart names after its namespace) under
// names of their own, and the policy letting that ServiceAccount set the
// owner label. The local run's GlobalManager runs as that identity, so that
// a release installed in SystemNamespace beside it (the README's helm
// install) neither collides with it nor, on helm uninstall, takes its
// permissions away. In the rendering, SystemNamespace appears only as the
// release's namespace, so it is replaced wherever it appears.
func (id *GlobalManagerIdentity) In(namespace string) (*GlobalManagerIdentity, error) {
	moved := &GlobalManagerIdentity{}
	for _, obj := range id.Objects {
		js, err := obj.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", obj.GetKind(), qualifiedName(obj), err)
		}
		c := &unstructured.Unstructured{}
		if err := c.UnmarshalJSON(bytes.ReplaceAll(js, []byte(SystemNamespace), []byte(namespace))); err != nil {
			return nil, fmt.Errorf("moving %s %s to %s: %w", obj.GetKind(), qualifiedName(obj), namespace, err)
		}
		moved.Objects = append(moved.Objects, c)
	}
	return moved, nil
}

// GlobalManagerToken mints a token of the chart's GlobalManager
// ServiceAccount in namespace, valid for lifetime.
func GlobalManagerToken(ctx context.Context, kube kubernetes.Interface, namespace string, lifetime time.Duration) (string, error) {
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, GlobalManagerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting a token of %s/%s: %w", namespace, GlobalManagerServiceAccount, err)
	}
	return tr.Status.Token, nil
}

// WriteTokenKubeconfig writes to path a kubeconfig of the cluster of cfg
// that authenticates as user with token, and nothing of cfg's own
// credentials.
func WriteTokenKubeconfig(path string, cfg *rest.Config, user, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile,
		CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName}
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
	clients, err := newResourceClients(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		client, err := clients.of(obj)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if _, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), qualifiedName(obj), err)
		}
	}
	return nil
}

// DeleteOwnedBy deletes those of objs that exist and that fieldManager
// alone wrote (Namespaces excepted): what an earlier local-up applied and
// nobody, helm included, took over since. It returns what it deleted.
func DeleteOwnedBy(ctx context.Context, cfg *rest.Config, fieldManager string, objs []*unstructured.Unstructured) ([]string, error) {
	clients, err := newResourceClients(cfg)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			continue
		}
		client, err := clients.of(obj)
		if err != nil {
			return deleted, err
		}
		live, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return deleted, err
		}
		if !writtenOnlyBy(live, fieldManager) {
			continue
		}
		err = client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(live.GetUID())}})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting %s %s: %w", obj.GetKind(), qualifiedName(obj), err)
		}
		deleted = append(deleted, obj.GetKind()+" "+qualifiedName(obj))
	}
	return deleted, nil
}

// writtenOnlyBy says whether fieldManager is the only manager of obj's fields.
func writtenOnlyBy(obj *unstructured.Unstructured, fieldManager string) bool {
	managed := obj.GetManagedFields()
	for _, m := range managed {
		if m.Manager != fieldManager {
			return false
		}
	}
	return len(managed) > 0
}

// resourceClients finds the dynamic client of an object's kind.
type resourceClients struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	dyn    *dynamic.DynamicClient
}

func newResourceClients(cfg *rest.Config) (*resourceClients, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &resourceClients{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)), dyn: dyn}, nil
}

func (c *resourceClients) of(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
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
