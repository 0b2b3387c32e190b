package sednaswitch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/test/framework"
)

// sampleNodes maps the node names in Sedna's samples to the local control
// plane's nodes.
var sampleNodes = map[string]string{
	"cloud": "cloud-0", "sedna-control-plane": "cloud-0",
	"edge0": "edge-0", "edge1": "edge-0", "edge-node": "edge-0", "edge2": "edge-1",
}

// sedna is what a test made under Sedna's CRDs.
type sedna struct {
	ns      string
	dyn     dynamic.Interface
	objects map[string]*unstructured.Unstructured // by kind/name
}

// createSample creates obj (a Sedna sample) in ns under the CRDs installed now,
// with its nodes mapped to this cluster's and, when name is set, renamed.
func (s *sedna) createSample(t *testing.T, obj *unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	obj = obj.DeepCopy()
	obj.SetNamespace(s.ns)
	if name != "" {
		obj.SetName(name)
	}
	mapNodeNames(obj.Object)
	gvr, err := framework.SednaResource(obj.GetKind())
	if err != nil {
		t.Fatal(err)
	}
	created, err := s.dyn.Resource(gvr).Namespace(s.ns).Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s under Sedna's CRD: %v", obj.GetKind(), obj.GetName(), err)
	}
	s.objects[created.GetKind()+"/"+created.GetName()] = created
	return created
}

func mapNodeNames(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if n, ok := x.(string); ok && k == "nodeName" && sampleNodes[n] != "" {
				v[k] = sampleNodes[n]
				continue
			}
			mapNodeNames(x)
		}
	case []any:
		for _, x := range v {
			mapNodeNames(x)
		}
	}
}

// sednaLabels are the labels Sedna's GlobalManager puts on an owner's
// children (runtime.generateLabels in kubeedge/sedna's pkg/globalmanager/runtime/worker.go).
func sednaLabels(owner *unstructured.Unstructured, workerType string) map[string]string {
	prefix := strings.ToLower(owner.GetKind()) + ".sedna.io/"
	return map[string]string{
		prefix + "name":        owner.GetName(),
		prefix + "uid":         string(owner.GetUID()),
		prefix + "worker-type": strings.ToLower(workerType),
	}
}

func sednaControllerRef(owner *unstructured.Unstructured) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "sedna.io/v1alpha1", Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

// sednaPod creates a worker pod as Sedna's GlobalManager does
// (runtime.CreatePodWithTemplate): from the template at path in owner's spec,
// named <owner>-<worker type>-<random>, with its labels, the owner as
// controller, its environment appended, restart policy OnFailure.
func (s *sedna) sednaPod(t *testing.T, owner *unstructured.Unstructured, workerType string, hostNetwork bool, env map[string]string, path ...any) {
	t.Helper()
	tmpl := templateAt(t, owner, path...)
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name = ""
	pod.GenerateName = owner.GetName() + "-" + strings.ToLower(workerType) + "-"
	pod.Labels = common.MergeLabels(pod.Labels, sednaLabels(owner, workerType))
	pod.OwnerReferences = sednaControllerRef(owner)
	pod.Spec.HostNetwork = hostNetwork
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	for i := range pod.Spec.Containers {
		for k, v := range env {
			pod.Spec.Containers[i].Env = append(pod.Spec.Containers[i].Env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	if _, err := framework.KubeClient(t).CoreV1().Pods(s.ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Sedna's %s pod of %s: %v", workerType, owner.GetName(), err)
	}
}

// sednaService creates a Service as Sedna's GlobalManager does
// (runtime.CreateEdgeMeshService): <owner>-<worker type>, selecting its labels.
func (s *sedna) sednaService(t *testing.T, owner *unstructured.Unstructured, workerType string, port int32) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: strings.ToLower(owner.GetName() + "-" + workerType), Labels: sednaLabels(owner, workerType),
			OwnerReferences: sednaControllerRef(owner),
		},
		Spec: corev1.ServiceSpec{
			Selector: sednaLabels(owner, workerType),
			Ports:    []corev1.ServicePort{{Name: "tcp-0", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}},
		},
	}
	if _, err := framework.KubeClient(t).CoreV1().Services(s.ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Sedna's %s Service of %s: %v", workerType, owner.GetName(), err)
	}
}

// sednaDeployment creates a worker Deployment as Sedna's GlobalManager does
// (runtime.CreateDeploymentWithTemplate): <owner>-deployment-<worker type>,
// its labels and app.sedna.io on it, its selector and its pods.
func (s *sedna) sednaDeployment(t *testing.T, owner *unstructured.Unstructured, workerType string, env map[string]string, path ...any) {
	t.Helper()
	tmpl := templateAt(t, owner, path...)
	labels := common.MergeLabels(sednaLabels(owner, workerType), map[string]string{"app.sedna.io": owner.GetName() + "-" + workerType + "-svc"})
	tmpl.Labels = common.MergeLabels(tmpl.Labels, labels)
	for i := range tmpl.Spec.Containers {
		for k, v := range env {
			tmpl.Spec.Containers[i].Env = append(tmpl.Spec.Containers[i].Env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: owner.GetName() + "-deployment-" + strings.ToLower(workerType), Labels: labels,
			OwnerReferences: sednaControllerRef(owner),
		},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
	if _, err := framework.KubeClient(t).AppsV1().Deployments(s.ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Sedna's %s Deployment of %s: %v", workerType, owner.GetName(), err)
	}
}

// sednaHPA creates a worker Deployment's autoscaler as Sedna's GlobalManager
// does: hpa-<its Deployment>, the worker's labels, the spec's hpa with the
// Deployment as its target.
func (s *sedna) sednaHPA(t *testing.T, owner *unstructured.Unstructured, workerType string) {
	t.Helper()
	deployment := owner.GetName() + "-deployment-" + strings.ToLower(workerType)
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-" + deployment, Labels: sednaLabels(owner, workerType), OwnerReferences: sednaControllerRef(owner)},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 2,
		},
	}
	if _, err := framework.KubeClient(t).AutoscalingV2().HorizontalPodAutoscalers(s.ns).Create(t.Context(), h, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Sedna's %s autoscaler of %s: %v", workerType, owner.GetName(), err)
	}
}

// sednaWorkerStopTime is how long Sedna's worker pods take to go once deleted
// (kwok holds them Terminating that long), as real workers do, so that a
// replacement made before they are gone would be seen beside them.
const sednaWorkerStopTime = "3s"

// templateAt reads the pod template at path in owner's spec.
func templateAt(t *testing.T, owner *unstructured.Unstructured, path ...any) corev1.PodTemplateSpec {
	t.Helper()
	var cur any = owner.Object
	for _, p := range path {
		switch p := p.(type) {
		case string:
			cur = cur.(map[string]any)[p]
		case int:
			cur = cur.([]any)[p]
		}
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.(map[string]any), &tmpl); err != nil {
		t.Fatalf("reading the template at %v of %s: %v", path, owner.GetName(), err)
	}
	tmpl.Annotations = common.MergeLabels(tmpl.Annotations, map[string]string{"nereid.io/kwok-delete-delay": sednaWorkerStopTime})
	return tmpl
}

// podCounter watches the namespace's pods and keeps, per owner UID, the most
// pods that existed at once (terminating ones included): a pod belongs to an
// owner by Nereid's owner-uid label or Sedna's <kind>.sedna.io/uid label.
type podCounter struct {
	mu   sync.Mutex
	pods map[types.UID]string // pod UID → owner UID
	max  map[string]int
	err  error
	stop func()
	done chan struct{}
}

func watchPods(t *testing.T, ns string) *podCounter {
	t.Helper()
	client := framework.KubeClient(t)
	list, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	c := &podCounter{pods: map[types.UID]string{}, max: map[string]int{}, done: make(chan struct{})}
	for i := range list.Items {
		c.observe(watch.Added, &list.Items[i])
	}
	ctx, cancel := context.WithCancel(t.Context())
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatalf("watching pods: %v", err)
	}
	c.stop = func() { cancel(); w.Stop(); <-c.done }
	go func() {
		defer close(c.done)
		for ev := range w.ResultChan() {
			switch pod := ev.Object.(type) {
			case *corev1.Pod:
				c.observe(ev.Type, pod)
			case *metav1.Status:
				if ctx.Err() == nil {
					c.mu.Lock()
					c.err = fmt.Errorf("the pod watch ended: %s", pod.Message)
					c.mu.Unlock()
				}
				return
			}
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.err = fmt.Errorf("the pod watch ended early")
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *podCounter) observe(typ watch.EventType, pod *corev1.Pod) {
	owner := pod.Labels[common.LabelOwnerUID]
	for k, v := range pod.Labels {
		if owner == "" && strings.HasSuffix(k, ".sedna.io/uid") {
			owner = v
		}
	}
	if owner == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if typ == watch.Deleted {
		delete(c.pods, pod.UID)
		return
	}
	c.pods[pod.UID] = owner
	n := 0
	for _, o := range c.pods {
		if o == owner {
			n++
		}
	}
	c.max[owner] = max(c.max[owner], n)
}

// maxOf returns the most pods owner had at once, and a watch failure if any.
func (c *podCounter) maxOf(owner types.UID) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max[string(owner)], c.err
}

// TestSwitchFromSednaInPlace installs Sedna's CRDs and creates Sedna's samples
// of every kind Nereid serves, with the workers Sedna's GlobalManager made for
// the federated learning job (pods and the aggregator's Service), the joint
// inference service (Deployments and the cloud Service) and the incremental
// learning job (a train pod). Then, as a user switching would, it applies
// Nereid's CRDs over Sedna's and starts Nereid's GlobalManager. The objects are
// served through Nereid's types with their specs as they were, status writes
// work, the jobs are reconciled, and Sedna's workers are replaced, never
// doubled: a watch sees no owner with more worker pods than its spec asks for
// (a joint inference service's Deployments, which have the names Nereid
// gives them and are kept, roll their pods over as any template update
// does: one new pod before the old one goes).
func TestSwitchFromSednaInPlace(t *testing.T) {
	compat := framework.SednaCompat(t)
	ns := framework.Namespace(t)
	installSednaCRDs(t, compat)
	dyn, err := dynamic.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := &sedna{ns: ns, dyn: dyn, objects: map[string]*unstructured.Unstructured{}}
	o := s.createSamples(t, filepath.Join(compat, "samples"))
	sednaUIDs, sednaCloud := s.sednasChildren(t, o)

	switchCRDs(t)
	sc, err := sednaclient.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	s.checkServedByNereidsCRDs(t, sc, o.fl, o.dataset)

	// Reconciled, Sedna's workers replaced, never doubled.
	counter := watchPods(t, ns)
	framework.StartGlobalManager(t, ns, "--adopt-sedna-workers")
	checkFederatedJobReplaced(t, sc, ns, o.fl)
	checkJointInferenceKeptSednasObjects(t, sc, ns, o.ji, sednaUIDs, sednaCloud)
	waitLearningJobsReconciled(t, sc, ns, o.il, o.ll)
	checkNeverDoubled(t, counter, o)
}

// createSamples creates, under Sedna's CRDs, a sample of every kind Nereid
// serves from Sedna's samples, and the Models and Datasets they name (made
// from the Model and Dataset samples).
func (s *sedna) createSamples(t *testing.T, samples string) sampleObjects {
	t.Helper()
	sample := func(file, kind string) *unstructured.Unstructured {
		return framework.ReadManifest(t, filepath.Join(samples, file), kind)
	}
	dataset, model := sample("dataset_v1alpha1.yaml", "Dataset"), sample("model_v1alpha1.yaml", "Model")
	s.createSample(t, dataset, "")
	s.createSample(t, model, "")
	for _, name := range []string{"edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset", "incremental-dataset", "lifelong-dataset"} {
		s.createSample(t, dataset, name)
	}
	for _, name := range []string{"surface-defect-detection-model", "helmet-detection-inference-little-model", "helmet-detection-inference-big-model", "initial-model", "deploy-model"} {
		s.createSample(t, model, name)
	}
	var o sampleObjects
	o.dataset = dataset
	o.fl = s.createSample(t, sample("federatedlearningjob_v1alpha1.yaml", "FederatedLearningJob"), "")
	// The cloud worker scales by an autoscaler, as Sedna's HPA sample's does.
	ji := sample("jointinferenceservice_v1alpha1.yaml", "JointInferenceService")
	cpu := map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(50)}}}
	if err := unstructured.SetNestedField(ji.Object, map[string]any{"minReplicas": int64(1), "maxReplicas": int64(2), "metrics": []any{cpu}}, "spec", "cloudWorker", "hpa"); err != nil {
		t.Fatal(err)
	}
	o.ji = s.createSample(t, ji, "")
	o.il = s.createSample(t, sample("incrementallearningjob_v1alpha1.yaml", "IncrementalLearningJob"), "")
	o.ll = s.createSample(t, sample("lifelonglearningjobv1alpha1.yaml", "LifelongLearningJob"), "")
	return o
}

// sampleObjects are the samples createSamples made.
type sampleObjects struct {
	dataset, fl, ji, il, ll *unstructured.Unstructured
}

// sednasChildren makes what Sedna's GlobalManager made for the samples o, as
// it makes them, and writes the federated learning job's status as it does;
// it returns the UIDs of the joint inference service's children that have
// the names Nereid gives them (Deployments and its cloud Service, by
// "<Kind> <name>"), and that Service, once Sedna's joint inference workers
// run.
func (s *sedna) sednasChildren(t *testing.T, o sampleObjects) (map[string]types.UID, *corev1.Service) {
	t.Helper()
	ctx, ns, dyn, fl, ji, il := t.Context(), s.ns, s.dyn, o.fl, o.ji, o.il
	// What Sedna's GlobalManager made for them, as it makes them
	// (federatedlearningjob.go createAggPod/createTrainPod/createService,
	// jointinferenceservice.go createWorkers, runtime.CreatePodWithTemplate).
	s.sednaPod(t, fl, "Aggregation", false, map[string]string{"WORKER_NAME": "aggworker-abcde", "JOB_NAME": fl.GetName(), "AGG_BIND_PORT": "7363", "PARTICIPANTS_COUNT": "2"},
		"spec", "aggregationWorker", "template")
	s.sednaService(t, fl, "Aggregation", 7363)
	for i := range 2 {
		s.sednaPod(t, fl, "train", true, map[string]string{"WORKER_NAME": fmt.Sprintf("trainworker-%05d", i), "AGG_IP": fl.GetName() + "-aggregation." + ns, "AGG_PORT": "7363"},
			"spec", "trainingWorkers", i, "template")
	}
	s.sednaDeployment(t, ji, "Cloud", map[string]string{"BIG_MODEL_BIND_PORT": "5000", "WORKER_NAME": "cloudworker-abcde"}, "spec", "cloudWorker", "template")
	s.sednaService(t, ji, "Cloud", 5000)
	s.sednaDeployment(t, ji, "Edge", map[string]string{"BIG_MODEL_IP": ji.GetName() + "-cloud." + ns, "BIG_MODEL_PORT": "5000", "WORKER_NAME": "edgeworker-abcde"}, "spec", "edgeWorker", "template")
	s.sednaHPA(t, ji, "Cloud")
	s.sednaPod(t, il, "train", false, map[string]string{"WORKER_NAME": "trainworker-abcde"}, "spec", "trainSpec", "template")
	// Sedna's status, as its GlobalManager writes it.
	flStatus := fl.DeepCopy()
	_ = unstructured.SetNestedField(flStatus.Object, map[string]any{"phase": "Running", "active": int64(3)}, "status")
	flGVR, _ := framework.SednaResource("FederatedLearningJob")
	if _, err := dyn.Resource(flGVR).Namespace(ns).UpdateStatus(ctx, flStatus, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing Sedna's status of %s: %v", fl.GetName(), err)
	}
	kube := framework.KubeClient(t)
	// Sedna's children of the joint inference service, which have the names
	// Nereid gives them: kept, so their UIDs stay.
	sednaUIDs := map[string]types.UID{}
	for _, name := range []string{ji.GetName() + "-deployment-cloud", ji.GetName() + "-deployment-edge"} {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sednaUIDs["Deployment "+name] = d.UID
	}
	sednaCloud, err := kube.CoreV1().Services(ns).Get(ctx, ji.GetName()+"-cloud", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sednaUIDs["Service "+sednaCloud.Name] = sednaCloud.UID
	hpa, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "hpa-"+ji.GetName()+"-deployment-cloud", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sednaUIDs["HorizontalPodAutoscaler "+hpa.Name] = hpa.UID
	framework.Eventually(t, waitLong, "Sedna's 2 joint inference worker pods to run", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jointinferenceservice.sedna.io/uid=" + string(ji.GetUID())})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	})
	return sednaUIDs, sednaCloud
}

// switchCRDs applies Nereid's CRDs over Sedna's as
// docs/switching-from-sedna.md says (an apply by another field manager is
// refused), and checks that they replaced Sedna's whole.
func switchCRDs(t *testing.T) {
	t.Helper()
	// Nereid's CRDs over Sedna's. With another field manager than Sedna's
	// apply, the API server refuses them: the versions list (and with it the
	// whole schema) is one atomic field that Sedna's apply owns.
	crds := filepath.Join(framework.RepoRoot(), "build", "crds")
	out, err := framework.Kubectl(t, "apply", "--server-side", "--field-manager=nereid-install", "-f", crds)
	if err == nil || !strings.Contains(err.Error(), "conflict") || !strings.Contains(err.Error(), ".spec.versions") {
		t.Fatalf("applying Nereid's CRDs with another field manager: want a conflict on .spec.versions, got %v\n%s", err, out)
	}
	applyNereidCRDs(t)
	for _, plural := range []string{"datasets", "models", "federatedlearningjobs", "jointinferenceservices", "incrementallearningjobs", "lifelonglearningjobs"} {
		got, err := framework.Kubectl(t, "get", "crd", plural+".sedna.io", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names struct {
					Categories []string `json:"categories"`
				} `json:"names"`
				Versions json.RawMessage `json:"versions"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(got), &crd); err != nil {
			t.Fatal(err)
		}
		// Sedna's schemas describe what Nereid's leave undescribed (the pod
		// templates' fields) and word the rest otherwise: no description
		// that Nereid's CRD lacks means the versions were replaced whole,
		// not merged.
		left := descriptionsNotIn(t, crd.Spec.Versions, filepath.Join(crds, "sedna.io_"+plural+".yaml"))
		if !cmp.Equal(crd.Spec.Names.Categories, []string{"sedna", "nereid"}) || len(left) > 0 {
			t.Errorf("CRD %s.sedna.io after applying Nereid's: categories %v, %d descriptions not Nereid's (first: %.80q); want Nereid's CRD", plural,
				crd.Spec.Names.Categories, len(left), append(left, "")[0])
		}
	}
}

// checkServedByNereidsCRDs checks that the objects s made are served by
// Nereid's CRDs: readable through Nereid's types, spec unchanged, status
// writable (Dataset dataset's) without touching the spec.
func (s *sedna) checkServedByNereidsCRDs(t *testing.T, sc sednaclient.Interface, fl, dataset *unstructured.Unstructured) {
	t.Helper()
	ctx, ns, dyn := t.Context(), s.ns, s.dyn
	// Served: readable through Nereid's types, spec unchanged, status writable.
	for key, before := range s.objects {
		gvr, _ := framework.SednaResource(before.GetKind())
		after, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, before.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading %s after the switch: %v", key, err)
		}
		if diff := cmp.Diff(before.Object["spec"], after.Object["spec"]); diff != "" {
			t.Errorf("spec of %s changed with Nereid's CRD (-Sedna's,+Nereid's):\n%s", key, diff)
		}
	}
	if _, err := sc.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, fl.GetName(), metav1.GetOptions{}); err != nil {
		t.Fatalf("reading %s through Nereid's clientset: %v", fl.GetName(), err)
	}
	d, err := sc.SednaV1alpha1().Datasets(ns).Get(ctx, dataset.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Dataset %s through Nereid's clientset: %v", dataset.GetName(), err)
	}
	d.Status.NumberOfSamples = 7
	d.Spec.URL = "/changed/by/a/status/write"
	if _, err := sc.SednaV1alpha1().Datasets(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status of Dataset %s: %v", d.Name, err)
	}
	if d, err = sc.SednaV1alpha1().Datasets(ns).Get(ctx, d.Name, metav1.GetOptions{}); err != nil || d.Status.NumberOfSamples != 7 || d.Spec.URL == "/changed/by/a/status/write" {
		t.Fatalf("Dataset %s after a status write: samples %d, url %q, err %v; want 7 samples and the spec unchanged", dataset.GetName(), d.Status.NumberOfSamples, d.Spec.URL, err)
	}
}

// checkFederatedJobReplaced waits until the federated learning job fl runs
// on Nereid's workers alone, and checks its Scheduled condition on a cluster
// without a gang scheduler and its aggregator's Service.
func checkFederatedJobReplaced(t *testing.T, sc sednaclient.Interface, ns string, fl *unstructured.Unstructured) {
	t.Helper()
	ctx, kube := t.Context(), framework.KubeClient(t)
	framework.Eventually(t, waitLong, "the federated learning job to run on Nereid's workers alone", func(ctx context.Context) (bool, error) {
		job, err := sc.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, fl.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "federatedlearningjob.sedna.io/uid=" + string(fl.GetUID())})
		if err != nil || len(pods.Items) > 0 {
			return false, err
		}
		ours, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.LabelOwnerUID + "=" + string(fl.GetUID())})
		if err != nil {
			return false, err
		}
		return job.Status.Phase == sednav1.FLJobRunning && job.Status.ObservedGeneration == job.Generation && len(ours.Items) == 3, nil
	})
	// A cluster without a gang scheduler: the job's pods were placed one by
	// one, and its condition says so, without an event.
	job, err := sc.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, fl.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := common.FindJobCondition(job.Status.Conditions, gang.ConditionScheduled); c == nil || c.Reason != gang.ReasonNoGangScheduler || !strings.Contains(c.Message, "serves no gang scheduling API") {
		t.Errorf("the federated learning job's %s condition on a cluster without a gang API: %+v; want reason %s", gang.ConditionScheduled, c, gang.ReasonNoGangScheduler)
	}
	if events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + fl.GetName()}); err == nil {
		for _, e := range events.Items {
			if strings.Contains(e.Reason, "Gang") {
				t.Errorf("event %s %q on a job without a gang scheduler; the condition alone says so", e.Reason, e.Message)
			}
		}
	}
	svc, err := kube.CoreV1().Services(ns).Get(ctx, fl.GetName()+"-aggregation", metav1.GetOptions{})
	if err != nil || svc.Spec.Selector[common.LabelOwnerUID] != string(fl.GetUID()) {
		t.Errorf("the aggregator's Service after the switch: selector %v, err %v; want Nereid's selector", svc.Spec.Selector, err)
	}
}

// checkJointInferenceKeptSednasObjects waits until the joint inference
// service ji is Ready on Sedna's Deployments, updated to Nereid's workers,
// and checks that Sedna's Deployments and cloud Service (sednaUIDs,
// sednaCloud) were kept, with Nereid's templates and selector.
func checkJointInferenceKeptSednasObjects(t *testing.T, sc sednaclient.Interface, ns string, ji *unstructured.Unstructured, sednaUIDs map[string]types.UID, sednaCloud *corev1.Service) {
	t.Helper()
	ctx, kube := t.Context(), framework.KubeClient(t)
	framework.Eventually(t, waitLong, "the joint inference service to be Ready on Sedna's Deployments, updated to Nereid's workers", func(ctx context.Context) (bool, error) {
		svc, err := sc.SednaV1alpha1().JointInferenceServices(ns).Get(ctx, ji.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		deployments, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var names []string
		for _, d := range deployments.Items {
			names = append(names, d.Name)
		}
		want := []string{ji.GetName() + "-deployment-cloud", ji.GetName() + "-deployment-edge"}
		return common.IsJobConditionTrue(svc.Status.Conditions, "Ready") && svc.Status.ObservedGeneration == svc.Generation && cmp.Equal(names, want), nil
	})
	for _, name := range []string{ji.GetName() + "-deployment-cloud", ji.GetName() + "-deployment-edge"} {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.UID != sednaUIDs["Deployment "+name] || common.IsAdopted(d) || d.Spec.Template.Labels[common.LabelOwnerUID] != string(ji.GetUID()) {
			t.Errorf("Deployment %s after the switch: UID %s (Sedna's %s), labels %v, template labels %v; want Sedna's, kept and Nereid's",
				name, d.UID, sednaUIDs["Deployment "+name], d.Labels, d.Spec.Template.Labels)
		}
	}
	ours, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.LabelOwnerUID + "=" + string(ji.GetUID())})
	if err != nil || len(ours.Items) < 2 {
		t.Errorf("the joint inference service's pods of Nereid's template: %d, err %v; want its 2 workers", len(ours.Items), err)
	}
	for _, p := range ours.Items {
		// Sedna's WORKER_NAME (<type>worker-<random>) is gone: the pod
		// reports under its own name, as Nereid's LocalController wants.
		var names []string
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "WORKER_NAME" {
				names = append(names, fmt.Sprintf("%s%+v", e.Value, e.ValueFrom))
			}
		}
		if len(names) != 1 || !strings.Contains(names[0], "metadata.name") {
			t.Errorf("pod %s's WORKER_NAME entries %v; want one, its own name", p.Name, names)
		}
	}
	// Sedna's autoscaler is kept and takes the spec's metrics.
	hpaName := "hpa-" + ji.GetName() + "-deployment-cloud"
	hpa, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpaName, metav1.GetOptions{})
	if err != nil || hpa.UID != sednaUIDs["HorizontalPodAutoscaler "+hpaName] || common.IsAdopted(hpa) || len(hpa.Spec.Metrics) != 1 || hpa.Spec.ScaleTargetRef.Name != ji.GetName()+"-deployment-cloud" {
		t.Errorf("the cloud worker's autoscaler after the switch: %+v, err %v; want Sedna's (UID %s), kept, with the spec's one metric",
			hpa, err, sednaUIDs["HorizontalPodAutoscaler "+hpaName])
	}
	cloud, err := kube.CoreV1().Services(ns).Get(ctx, ji.GetName()+"-cloud", metav1.GetOptions{})
	if err != nil || cloud.UID != sednaCloud.UID || cloud.Spec.Selector[common.LabelOwnerUID] != string(ji.GetUID()) || cloud.Spec.ClusterIP != sednaCloud.Spec.ClusterIP {
		t.Errorf("the cloud worker's Service after the switch: UID %s (Sedna's %s), address %s (Sedna's %s), selector %v, err %v; want Sedna's, kept, with Nereid's selector",
			cloud.UID, sednaCloud.UID, cloud.Spec.ClusterIP, sednaCloud.Spec.ClusterIP, cloud.Spec.Selector, err)
	}
}

// waitLearningJobsReconciled waits until the incremental and lifelong
// learning jobs il and ll are reconciled and Sedna's train pod is gone.
func waitLearningJobsReconciled(t *testing.T, sc sednaclient.Interface, ns string, il, ll *unstructured.Unstructured) {
	t.Helper()
	kube := framework.KubeClient(t)
	framework.Eventually(t, waitLong, "the learning jobs to be reconciled, Sedna's train pod gone", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "incrementallearningjob.sedna.io/uid=" + string(il.GetUID())})
		if err != nil || len(pods.Items) > 0 {
			return false, err
		}
		ilJob, err := sc.SednaV1alpha1().IncrementalLearningJobs(ns).Get(ctx, il.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		llJob, err := sc.SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, ll.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ilJob.Status.ObservedGeneration == ilJob.Generation && llJob.Status.ObservedGeneration == llJob.Generation && ilJob.Status.Active > 0, nil
	})
}

// checkNeverDoubled checks that no job of o had Sedna's and Nereid's workers
// side by side: never more worker pods at once than it wants.
func checkNeverDoubled(t *testing.T, counter *podCounter, o sampleObjects) {
	t.Helper()
	fl, ji, il := o.fl, o.ji, o.il
	for _, o := range []struct {
		obj  *unstructured.Unstructured
		want int
	}{{fl, 3}, {ji, 4}, {il, 2}} {
		got, err := counter.maxOf(o.obj.GetUID())
		if err != nil {
			t.Fatal(err)
		}
		if got > o.want {
			t.Errorf("%s %s had %d worker pods at once; want at most %d (Sedna's and Nereid's side by side)", o.obj.GetKind(), o.obj.GetName(), got, o.want)
		}
	}
}

// descriptionsNotIn are the descriptions in versions (a CRD's spec.versions
// as served) that the CRD in file does not have.
func descriptionsNotIn(t *testing.T, versions json.RawMessage, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ours struct {
		Spec struct {
			Versions any `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &ours); err != nil {
		t.Fatal(err)
	}
	var served any
	if err := json.Unmarshal(versions, &served); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	collectDescriptions(ours.Spec.Versions, func(d string) { want[d] = true })
	var left []string
	collectDescriptions(served, func(d string) {
		if !want[d] {
			left = append(left, d)
		}
	})
	return left
}

// collectDescriptions calls found with every string value of a
// "description" key in v.
func collectDescriptions(v any, found func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if d, ok := child.(string); ok && k == "description" {
				found(d)
				continue
			}
			collectDescriptions(child, found)
		}
	case []any:
		for _, e := range v {
			collectDescriptions(e, found)
		}
	}
}
