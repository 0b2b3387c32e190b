package view

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidfake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// now is the tests' time.
var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func meta(ns, name string, uid types.UID) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, CreationTimestamp: metav1.NewTime(ago(time.Hour))}
}

// clients are fake clients holding kube's and nereid's objects.
func clients(ns string, kube []runtime.Object, nereid []runtime.Object) (*cli.Clients, *kubefake.Clientset, *nereidfake.Clientset) {
	k, n := kubefake.NewClientset(kube...), nereidfake.NewClientset(nereid...)
	return &cli.Clients{Kube: k, Nereid: n, Namespace: ns}, k, n
}

func node(name string, edge bool, ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if edge {
		n.Labels["node-role.kubernetes.io/edge"] = ""
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	return n
}

// lease is node's link Lease as the hub writes it: link, renewed ago.
func lease(nodeName, link string, renewed time.Duration, outbox string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "nereid-system", Name: links.LeaseName(nodeName),
			Labels:      map[string]string{links.LabelEdgeNode: nodeName},
			Annotations: map[string]string{links.AnnotationLink: link, links.AnnotationOutbox: outbox}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(nodeName), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: ago(renewed)}},
	}
}

// pod is a worker of the object with uid (none: no worker), on nodeName
// ("" unscheduled).
func pod(ns, name string, uid types.UID, nodeName string, phase corev1.PodPhase, labels ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
	if uid != "" {
		p.Labels[common.LabelOwnerUID] = string(uid)
	}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	p.Spec.NodeName = nodeName
	p.Status.Phase = phase
	return p
}

func unschedulable(p *corev1.Pod, message string) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: message}}
	return p
}

func dataset(ns, name, nodeName string) *sednav1.Dataset {
	return &sednav1.Dataset{ObjectMeta: meta(ns, name, types.UID("ds-"+name)), Spec: sednav1.DatasetSpec{NodeName: nodeName}}
}

func condition(t string, status corev1.ConditionStatus, reason, message string) sednav1.JobCondition {
	return sednav1.JobCondition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(ago(time.Minute))}
}

func metrics(kv ...string) []sednav1.Metric {
	var out []sednav1.Metric
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, sednav1.Metric{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func mtime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

func tp(t time.Time) *time.Time { return &t }
