package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/test/framework"
)

// The fields the chart's owner-label policy names when it refuses.
const (
	policyLabelField         = "metadata.labels[nereid.io/owner-uid]"
	policyTemplateLabelField = "spec.template.metadata.labels[nereid.io/owner-uid]"
	policyJobTemplateField   = "spec.jobTemplate.metadata.labels[nereid.io/owner-uid]"
	policyOwnersField        = "metadata.ownerReferences"
)

// policyAuthor is a ServiceAccount of ns allowed rules (and to create pods),
// under the chart's owner-label policy: it returns the account's REST
// config once the API server has loaded the policy.
func policyAuthor(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	framework.GlobalManagerKubeconfig(t, ns) // applies the chart's policy
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete"}})
	cfg := rest.AnonymousClientConfig(framework.RESTConfig())
	cfg.BearerToken = serviceAccountToken(t, ns, name, rules)
	author := kubernetes.NewForConfigOrDie(cfg)
	labelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-loaded-", Namespace: ns, Labels: map[string]string{common.LabelOwnerUID: "0"}},
		Spec: corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	// The API server loads a new policy within a few seconds.
	var err error
	framework.Eventually(t, 30*time.Second, "the policy to refuse a Pod carrying the owner label", func(ctx context.Context) (bool, error) {
		var made *corev1.Pod
		if made, err = author.CoreV1().Pods(ns).Create(ctx, labelled, metav1.CreateOptions{}); err == nil { // not loaded yet
			return false, author.CoreV1().Pods(ns).Delete(ctx, made.Name, metav1.DeleteOptions{})
		}
		// RBAC's refusal, before the ServiceAccount's Role reaches the
		// authorizer, is not the policy's: wait on.
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), policyLabelField), nil
	})
	refusedByPolicy(t, "a Pod carrying the owner label", err, policyLabelField, "on pods;")
	return cfg
}

// refusedByPolicy reports whether err is the owner-label policy's refusal
// naming field and the other words; an error of the test when not.
func refusedByPolicy(t *testing.T, what string, err error, field string, words ...string) bool {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed", what)
		return false
	}
	named := true
	for _, w := range append([]string{field}, words...) {
		named = named && strings.Contains(err.Error(), w)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !named {
		t.Errorf("%s: %v, want the policy's refusal naming %s %v", what, err, field, words)
		return false
	}
	return true
}

// Only the GlobalManager, and the controllers that copy its templates, may
// set the label that makes an object a child of a Nereid job (the chart's
// ValidatingAdmissionPolicy): a user who may create and edit Pods,
// ReplicaSets, Deployments, Jobs and CronJobs in a job's namespace can
// neither make one carry it, nor add it, nor put it in a workload's pod
// template (whose pods a controller would make with it, to be orphaned and
// adopted into a service's ReplicaSet) or a CronJob's job template (whose
// Jobs would carry it), nor point a labelled pod at another owner. That the
// GlobalManager and the deployment and replicaset controllers may is what
// every other test shows: they all run under the policy.
func TestOnlyNereidAndItsControllersSetTheOwnerLabel(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	cfg := policyAuthor(t, ns, "author", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"create"}},
	})
	author := kubernetes.NewForConfigOrDie(cfg)
	owner := map[string]string{common.LabelOwnerUID: "0b6a3a43-0b5e-4c55-9d0b-2f4e1e8a1c11", common.LabelWorkerRole: "edge"}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	refused := func(what string, err error, field string) { t.Helper(); refusedByPolicy(t, what, err, field) }

	// Adding the label to a Pod of one's own.
	if _, err := author.CoreV1().Pods(ns).Create(t.Context(), pod("plain", map[string]string{"app": "plain"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, common.LabelOwnerUID, owner[common.LabelOwnerUID])
	_, err := author.CoreV1().Pods(ns).Patch(t.Context(), "plain", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	refused("adding the owner label to a Pod", err, policyLabelField)

	// A ReplicaSet or Deployment carrying it, which a Deployment selecting
	// those labels would adopt.
	replicas := int32(1)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "adoptee", Namespace: ns, Labels: owner},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: owner},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: owner}, Spec: pod("", nil).Spec}},
	}
	_, err = author.AppsV1().ReplicaSets(ns).Create(t.Context(), rs, metav1.CreateOptions{})
	refused("a ReplicaSet carrying the owner label", err, policyLabelField)
	_, err = author.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled", Namespace: ns, Labels: owner}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: rs.Spec.Selector, Template: rs.Spec.Template}}, metav1.CreateOptions{})
	refused("a Deployment carrying the owner label", err, policyLabelField)

	// Workloads whose pod template alone carries it: their controllers would
	// make labelled pods, orphaned with --cascade=orphan and adopted by a
	// service's ReplicaSet whose selector they match.
	rs.Labels = map[string]string{"app": "templated"}
	_, err = author.AppsV1().ReplicaSets(ns).Create(t.Context(), rs, metav1.CreateOptions{})
	refused("a ReplicaSet whose template carries the owner label", err, policyTemplateLabelField)
	_, err = author.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "templated", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: rs.Spec.Selector, Template: rs.Spec.Template}}, metav1.CreateOptions{})
	refused("a Deployment whose template carries the owner label", err, policyTemplateLabelField)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "templated", Namespace: ns, Labels: rs.Labels}, Spec: batchv1.JobSpec{Template: rs.Spec.Template}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = author.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	refused("a Job whose template carries the owner label", err, policyTemplateLabelField)
	// A CronJob whose job template carries it: the cronjob-controller's Jobs
	// would carry it (and be refused, each, long after the CronJob was
	// admitted).
	cron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "labelled-jobs", Namespace: ns}, Spec: batchv1.CronJobSpec{
		Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: owner},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: job.Spec.Template.Spec}}}}}
	_, err = author.BatchV1().CronJobs(ns).Create(t.Context(), cron, metav1.CreateOptions{})
	refused("a CronJob whose job template carries the owner label", err, policyJobTemplateField)
	// Adding it to a template of one's own.
	if _, err := author.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "plain"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "plain"}}, Spec: pod("", nil).Spec}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = author.AppsV1().Deployments(ns).Patch(t.Context(), "plain", types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`, common.LabelOwnerUID, owner[common.LabelOwnerUID]), metav1.PatchOptions{})
	refused("adding the owner label to a Deployment's template", err, policyTemplateLabelField)

	// Pointing a labelled pod (one the GlobalManager made, say) at another
	// owner: the chain would then run through it.
	admin := framework.KubeClient(t)
	if _, err := admin.CoreV1().Pods(ns).Create(t.Context(), pod("child", owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refs := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"sedna.io/v1alpha1","kind":"JointInferenceService","name":"x","uid":%q,"controller":true}]}}`,
		owner[common.LabelOwnerUID])
	_, err = author.CoreV1().Pods(ns).Patch(t.Context(), "child", types.MergePatchType, []byte(refs), metav1.PatchOptions{})
	refused("changing the owner references of a labelled pod", err, policyOwnersField)
	// What carries no label is none of the policy's business.
	if _, err := author.CoreV1().Pods(ns).Patch(t.Context(), "plain", types.MergePatchType, []byte(refs), metav1.PatchOptions{}); err != nil {
		t.Errorf("changing the owner references of an unlabelled pod: %v", err)
	}
}

// The attack of issue 43: who may create pods and write their status (and
// no more) makes a pod on edge-1 with the service's edge worker's labels but
// the owner label, a high deletion cost, then adds the owner label through
// pods/status, which takes metadata.labels from the request. The service's
// ReplicaSet would adopt it and delete the real worker. The policy refuses
// the status write, and the worker stays.
func TestAPodsStatusCannotLaunderItIntoAServicesReplicaSet(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	ji := applyJointInferenceExample(t, ns)
	cfg := policyAuthor(t, ns, "launderer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "patch", "update"}},
	})
	launderer := kubernetes.NewForConfigOrDie(cfg)
	kube := framework.KubeClient(t)
	edge := common.OwnerSelector(ji).String() + "," + common.LabelWorkerRole + "=edge"
	sets, err := kube.AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: edge})
	if err != nil || len(sets.Items) != 1 {
		t.Fatalf("the service's edge ReplicaSets: %v %v, want one", sets, err)
	}
	workers, err := kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: edge})
	if err != nil || len(workers.Items) != 1 {
		t.Fatalf("the service's edge workers: %v %v, want one", workers, err)
	}
	worker := workers.Items[0]

	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns,
			Labels: map[string]string{
				common.LabelWorkerRole:                       "edge",
				common.LabelOwnerName:                        ji.Name,
				"pod-template-hash":                          sets.Items[0].Labels["pod-template-hash"],
				"controller.kubernetes.io/pod-deletion-cost": "100000",
			},
			Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "100000"}},
		Spec: corev1.PodSpec{NodeName: "edge-1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := launderer.CoreV1().Pods(ns).Create(t.Context(), impostor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, common.LabelOwnerUID, ji.UID)
	_, err = launderer.CoreV1().Pods(ns).Patch(t.Context(), impostor.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	refusedByPolicy(t, "adding the owner label through pods/status", err, policyLabelField, "pods/status")

	got, err := kube.CoreV1().Pods(ns).Get(t.Context(), impostor.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Labels[common.LabelOwnerUID]; ok || len(got.OwnerReferences) > 0 {
		t.Errorf("the impostor pod carries labels %v and owners %v: laundered into the service", got.Labels, got.OwnerReferences)
	}
	// The ReplicaSet, which would have adopted it and let one of its two
	// pods go, still has the worker and only it.
	now, err := kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: edge})
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Items) != 1 || now.Items[0].UID != worker.UID || now.Items[0].DeletionTimestamp != nil {
		t.Errorf("the service's edge workers: %v, want the worker %s (uid %s) alone and not deleted", podNames(now.Items), worker.Name, worker.UID)
	}
}

func podNames(pods []corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name + " " + string(p.UID)
	}
	return names
}

// statusKinds are the kinds the owner-label policy guards whose status
// subresource takes metadata from the request, each as an object a test
// can make (no name, no labels) and that makes nothing.
var statusKinds = map[string]struct {
	gvr    schema.GroupVersionResource
	object string
}{
	"Pod": {schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		`{"apiVersion":"v1","kind":"Pod","spec":{"schedulerName":"none","containers":[{"name":"c","image":"busybox"}]}}`},
	"Service": {schema.GroupVersionResource{Version: "v1", Resource: "services"},
		`{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":80}]}}`},
	"ReplicationController": {schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"},
		`{"apiVersion":"v1","kind":"ReplicationController","spec":{"replicas":0,"selector":{"app":"s"},"template":` + statusKindTemplate + `}}`},
	"Deployment": {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":0,"selector":{"matchLabels":{"app":"s"}},"template":` + statusKindTemplate + `}}`},
	"ReplicaSet": {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"},
		`{"apiVersion":"apps/v1","kind":"ReplicaSet","spec":{"replicas":0,"selector":{"matchLabels":{"app":"s"}},"template":` + statusKindTemplate + `}}`},
	"StatefulSet": {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"},
		`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"replicas":0,"serviceName":"s","selector":{"matchLabels":{"app":"s"}},"template":` + statusKindTemplate + `}}`},
	"DaemonSet": {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
		`{"apiVersion":"apps/v1","kind":"DaemonSet","spec":{"selector":{"matchLabels":{"app":"s"}},"template":{"metadata":{"labels":{"app":"s"}},"spec":{"nodeSelector":{"nereid-test/none":"x"},"containers":[{"name":"c","image":"busybox"}]}}}}`},
	"Job": {schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
		`{"apiVersion":"batch/v1","kind":"Job","spec":{"suspend":true,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`},
	"CronJob": {schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"},
		`{"apiVersion":"batch/v1","kind":"CronJob","spec":{"suspend":true,"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`},
	"HorizontalPodAutoscaler": {schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":2,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"s"}}}`},
}

const statusKindTemplate = `{"metadata":{"labels":{"app":"s"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`

// statusKindObject makes an object of kind named name with labels, as the
// cluster's administrator.
func statusKindObject(t *testing.T, dyn dynamic.Interface, ns, kind, name string, labels map[string]string) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(statusKinds[kind].object), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetName(name)
	obj.SetLabels(labels)
	if _, err := dyn.Resource(statusKinds[kind].gvr).Namespace(ns).Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", kind, name, err)
	}
}

// A status write (a PATCH or PUT of the status subresource) keeps the spec
// but, on most kinds, takes metadata.labels and metadata.ownerReferences
// from the request: whoever may write the status of a kind the owner-label
// policy guards could otherwise add the label to an object of their own, or
// point a labelled one at another owner, with no right to update the object.
// The policy refuses both on every such kind; a status write that leaves
// the label and the owners as they were (the kubelet's, the controllers')
// passes.
func TestNoStatusWriteSetsTheOwnerLabelOrChangesOwners(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	var rules []rbacv1.PolicyRule
	for _, k := range statusKinds {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k.gvr.Group}, Resources: []string{k.gvr.Resource + "/status"}, Verbs: []string{"get", "patch", "update"}})
	}
	author := dynamic.NewForConfigOrDie(policyAuthor(t, ns, "status-writer", rules))
	admin := dynamic.NewForConfigOrDie(framework.RESTConfig())
	owner, err := framework.KubeClient(t).CoreV1().ConfigMaps(ns).Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := "0b6a3a43-0b5e-4c55-9d0b-2f4e1e8a1c11"
	for kind, k := range statusKinds {
		t.Run(kind, func(t *testing.T) {
			plain, labelled := strings.ToLower(kind)+"-plain", strings.ToLower(kind)+"-labelled"
			statusKindObject(t, admin, ns, kind, plain, map[string]string{"app": "plain"})
			statusKindObject(t, admin, ns, kind, labelled, map[string]string{common.LabelOwnerUID: uid})
			write := func(name, patch string) error {
				_, err := author.Resource(k.gvr).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				return err
			}
			get := func(name string) *unstructured.Unstructured {
				obj, err := admin.Resource(k.gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return obj
			}
			target := k.gvr.Resource + "/status"
			// Adding the label. (The API server drops it from a
			// Deployment's status write: nothing to refuse there.)
			err := write(plain, fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, common.LabelOwnerUID, uid))
			if got := get(plain).GetLabels()[common.LabelOwnerUID]; err != nil || got != "" {
				refusedByPolicy(t, "adding the owner label through "+target, err, policyLabelField, target)
			}
			// Changing its value.
			err = write(labelled, fmt.Sprintf(`{"metadata":{"labels":{%q:"another"}}}`, common.LabelOwnerUID))
			if got := get(labelled).GetLabels()[common.LabelOwnerUID]; err != nil || got != uid {
				refusedByPolicy(t, "changing the owner label through "+target, err, policyLabelField, target)
			}
			// Pointing the labelled object at another owner. (The API
			// server drops a Pod's owners from its status write.)
			err = write(labelled, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":%q}]}}`, owner.UID))
			if got := get(labelled).GetOwnerReferences(); err != nil || len(got) > 0 {
				refusedByPolicy(t, "changing the owners of a labelled object through "+target, err, policyOwnersField, target)
			}
			// A status write that leaves the label and the owners alone.
			if err := write(labelled, `{"metadata":{"annotations":{"nereid-test/status-written":"yes"}}}`); err != nil {
				t.Errorf("a status write keeping the owner label: %v", err)
			}
		})
	}
}

// A pod's binding (pods/binding, or the older bindings resource) copies its
// labels onto the pod, whatever the pod had: whoever may bind pods could
// otherwise give one the owner label. A binding without it binds.
func TestABindingCannotSetTheOwnerLabel(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	cfg := policyAuthor(t, ns, "binder", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods/binding", "bindings"}, Verbs: []string{"create"}},
	})
	binder := kubernetes.NewForConfigOrDie(cfg)
	kube := framework.KubeClient(t)
	for _, name := range []string{"bound-by-subresource", "bound-by-bindings"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := func(pod string, labels map[string]string) *corev1.Binding {
		return &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Labels: labels},
			Target: corev1.ObjectReference{Kind: "Node", Name: "edge-0"}}
	}
	labelled := map[string]string{common.LabelOwnerUID: "0b6a3a43-0b5e-4c55-9d0b-2f4e1e8a1c11"}
	err := binder.CoreV1().Pods(ns).Bind(t.Context(), binding("bound-by-subresource", labelled), metav1.CreateOptions{})
	refusedByPolicy(t, "a pods/binding carrying the owner label", err, policyLabelField, "pods/binding")
	err = binder.CoreV1().RESTClient().Post().Namespace(ns).Resource("bindings").Body(binding("bound-by-bindings", labelled)).Do(t.Context()).Error()
	refusedByPolicy(t, "a binding carrying the owner label", err, policyLabelField, "bindings")
	for _, name := range []string{"bound-by-subresource", "bound-by-bindings"} {
		if pod, err := kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil || pod.Labels[common.LabelOwnerUID] != "" {
			t.Errorf("pod %s after a binding carrying the owner label: %v, labels %v", name, err, pod.Labels)
		}
	}
	if err := binder.CoreV1().Pods(ns).Bind(t.Context(), binding("bound-by-subresource", map[string]string{"app": "bound"}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a binding without the owner label: %v", err)
	}
}
