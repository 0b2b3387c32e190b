package realnode

import (
	"fmt"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// corednsUser is CoreDNS's identity: it reads Services, their endpoints,
// Pods and Namespaces, nothing else.
const corednsUser = "nereid:coredns"

// corefile is CoreDNS's configuration: the cluster's names, answered from
// the API server, on port 53 of the cluster network namespace (the
// kubelets' clusterDNS). Nothing is forwarded: this machine has no upstream
// DNS, so a name outside the cluster fails at once instead of timing out.
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    errors
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`, kubeconfig)
}

// corednsFiles are the paths of CoreDNS's files under the run's folder.
func corednsFiles(l Layout) (conf, kubeconfig string) {
	return filepath.Join(l.Dir(), "coredns", "Corefile"), filepath.Join(l.Dir(), "coredns", "kubeconfig")
}

// corednsRBAC is what CoreDNS's kubernetes plugin reads.
func corednsRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	name := "nereid:realnode:coredns"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces", "endpoints"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: corednsUser}},
	}
	return role, binding
}

// kubeletClientUser is the API server's identity towards the kubelets (its
// --kubelet-client-certificate): the kubelets ask the API server whether it
// may read logs and exec, which the binding to system:kubelet-api-admin
// allows, as kubeadm binds it.
const kubeletClientUser = "kube-apiserver-kubelet-client"

func kubeletClientRBAC() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nereid:realnode:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: kubeletClientUser}},
	}
}
