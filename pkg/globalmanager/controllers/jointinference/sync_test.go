package jointinference

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/internal/fakeapi"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const (
	ns        = "default"
	jiName    = "helmet-detection-inference-example"
	edgeName  = jiName + "-deployment-edge"
	cloudName = jiName + "-deployment-cloud"
	// Sedna's names of the cloud worker's Service and the autoscalers.
	serviceName = jiName + "-cloud"
	edgeHPA     = "hpa-" + edgeName
	cloudHPA    = "hpa-" + cloudName
	key         = ns + "/" + jiName
)

var testConfig = Config{}

// testWorker is what workers are told of their LocalController and data.
var testWorker = kinds.Worker{LocalController: common.LCAddress{Port: 9100}, LogLevel: "INFO", DataPathPrefix: "/home/data"}

// exampleObjects decodes examples/jointinferenceservice: the service and its
// two Models, in namespace ns.
func exampleObjects(t *testing.T) (*sednav1.JointInferenceService, []runtime.Object) {
	t.Helper()
	files, err := filepath.Glob("../../../../examples/jointinferenceservice/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("finding the example: %v (found %d files)", err, len(files))
	}
	var ji *sednav1.JointInferenceService
	var models []runtime.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch meta.Kind {
			case "JointInferenceService":
				ji = &sednav1.JointInferenceService{}
				if err := yaml.UnmarshalStrict(doc, ji); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			case "Model":
				m := &sednav1.Model{}
				if err := yaml.UnmarshalStrict(doc, m); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				m.Namespace = ns
				models = append(models, m)
			}
		}
	}
	if ji == nil || len(models) != 2 {
		t.Fatalf("the example has no service or not two models (%d)", len(models))
	}
	ji.Namespace, ji.UID, ji.Generation = ns, "ji-uid", 1
	return ji, models
}

type fixture struct {
	c        *Controller
	kube     *kubefake.Clientset
	sedna    *sednafake.Clientset
	recorder *record.FakeRecorder
	indexers map[string]cache.Indexer // by kind
}

// newFixture seeds the fake clients and the informers' indexers with objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	var kubeObjs, sednaObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *appsv1.Deployment, *corev1.Service, *autoscalingv2.HorizontalPodAutoscaler, *appsv1.ReplicaSet, *corev1.Pod:
			kubeObjs = append(kubeObjs, o)
		default:
			sednaObjs = append(sednaObjs, o)
		}
	}
	f := &fixture{
		kube:     kubefake.NewClientset(kubeObjs...),
		sedna:    sednafake.NewClientset(sednaObjs...),
		recorder: record.NewFakeRecorder(100),
	}
	fakeapi.ConditionalUpdates(f.sedna)
	ki := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	si := sednainformers.NewSharedInformerFactory(f.sedna, 0)
	v1 := si.Sedna().V1alpha1()
	c, err := NewController(t.Context(), kinds.Deps{Kube: f.kube, Client: f.sedna, KubeInformers: ki, Informers: si,
		Recorder: f.recorder, Worker: testWorker, Clock: testingclock.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	f.indexers = map[string]cache.Indexer{
		"JointInferenceService":   v1.JointInferenceServices().Informer().GetIndexer(),
		"Model":                   v1.Models().Informer().GetIndexer(),
		"Deployment":              ki.Apps().V1().Deployments().Informer().GetIndexer(),
		"Service":                 ki.Core().V1().Services().Informer().GetIndexer(),
		"HorizontalPodAutoscaler": ki.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer(),
		"ReplicaSet":              ki.Apps().V1().ReplicaSets().Informer().GetIndexer(),
		"Pod":                     ki.Core().V1().Pods().Informer().GetIndexer(),
	}
	for _, o := range objs {
		f.cache(t, o)
	}
	return f
}

// cache puts obj into its informer's indexer, as a watch event would.
func (f *fixture) cache(t *testing.T, obj runtime.Object) {
	t.Helper()
	var kind string
	switch obj.(type) {
	case *sednav1.JointInferenceService:
		kind = "JointInferenceService"
	case *sednav1.Model:
		kind = "Model"
	case *appsv1.Deployment:
		kind = "Deployment"
	case *corev1.Service:
		kind = "Service"
	case *autoscalingv2.HorizontalPodAutoscaler:
		kind = "HorizontalPodAutoscaler"
	case *appsv1.ReplicaSet:
		kind = "ReplicaSet"
	case *corev1.Pod:
		kind = "Pod"
	default:
		t.Fatalf("no indexer for %T", obj)
	}
	if err := f.indexers[kind].Update(obj); err != nil {
		t.Fatal(err)
	}
}

// settle syncs and feeds what the sync wrote back into the caches, as the
// watches would (the children it created, the status it wrote), twice: the
// second round sees the children in the cache and updates the status for it.
func (f *fixture) settle(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for round := range 2 {
		if err := f.c.sync(ctx, key); err != nil {
			t.Fatalf("sync %d: %v", round, err)
		}
		deployments, err := f.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range deployments.Items {
			f.cache(t, &deployments.Items[i])
		}
		services, err := f.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range services.Items {
			f.cache(t, &services.Items[i])
		}
		hpas, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range hpas.Items {
			f.cache(t, &hpas.Items[i])
		}
		f.cache(t, f.storedService(t))
	}
	f.kube.ClearActions()
	f.sedna.ClearActions()
	f.drainEvents()
}

func (f *fixture) storedService(t *testing.T) *sednav1.JointInferenceService {
	t.Helper()
	ji, err := f.sedna.SednaV1alpha1().JointInferenceServices(ns).Get(t.Context(), jiName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ji
}

func (f *fixture) cachedService(t *testing.T) *sednav1.JointInferenceService {
	t.Helper()
	ji, err := f.c.syncer.Get(ns, jiName)
	if err != nil {
		t.Fatal(err)
	}
	return ji
}

// writes lists the kube client's writes as "verb resource name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		switch a.GetVerb() {
		case "create", "update":
			obj := a.(interface{ GetObject() runtime.Object }).GetObject()
			out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), a.GetResource().Resource, name(obj)))
		case "delete":
			out = append(out, fmt.Sprintf("delete %s %s", a.GetResource().Resource, a.(clienttesting.DeleteAction).GetName()))
		}
	}
	sort.Strings(out)
	return out
}

func name(obj runtime.Object) string {
	m, _ := obj.(metav1.Object)
	if m == nil {
		return "?"
	}
	return m.GetName()
}

// created returns the object the kube client was asked to create, by resource and name.
func (f *fixture) created(t *testing.T, resource, objName string) runtime.Object {
	t.Helper()
	for _, a := range f.kube.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && a.GetVerb() == "create" && c.GetResource().Resource == resource && name(c.GetObject()) == objName {
			return c.GetObject()
		}
	}
	t.Fatalf("no %s %s created; writes: %v", resource, objName, f.writes())
	return nil
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// envOf flattens a container's environment: literal values as they are, a
// value from elsewhere as "from <source>".
func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			m[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			m[e.Name] = "from field " + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom.SecretKeyRef != nil:
			m[e.Name] = "from secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return m
}

func ownerRef() metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "sedna.io/v1alpha1", Kind: "JointInferenceService", Name: jiName, UID: "ji-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

func TestJointInferenceServiceCreatesChildrenOfExample(t *testing.T) {
	ji, models := exampleObjects(t)
	// Credentials of the big model come from its Secret, by reference.
	models[0].(*sednav1.Model).Spec.CredentialName = "s3-secret"
	f := newFixture(t, append(models, ji)...)
	if err := f.c.sync(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	wantWrites := []string{
		"create deployments " + cloudName,
		"create deployments " + edgeName,
		"create horizontalpodautoscalers " + cloudHPA,
		"create services " + serviceName,
	}
	if diff := cmp.Diff(wantWrites, f.writes()); diff != "" {
		t.Fatalf("writes (-want,+got):\n%s", diff)
	}

	shared := map[string]string{
		"NAMESPACE": ns, "SERVICE_NAME": jiName, "WORKER_NAME": "from field metadata.name",
		"LC_SERVER": "http://$(NEREID_NODE_IP):9100", "NEREID_NODE_IP": "from field status.hostIP", "LOG_LEVEL": "INFO", "DATA_PATH_PREFIX": "/home/data",
	}
	cases := map[string]struct {
		deployment string
		wantEnv    map[string]string
		wantMount  corev1.VolumeMount
		wantPath   string
	}{
		"edge worker": {
			deployment: edgeName,
			wantEnv: common.MergeLabels(shared, map[string]string{
				"MODEL_NAME":     "helmet-detection-inference-little-model",
				"MODEL_URL":      "/home/data/data/little-model/yolov3_resnet18.pb",
				"BIG_MODEL_IP":   serviceName + "." + ns,
				"BIG_MODEL_PORT": "5000",
				"HEM_NAME":       "IBT",
				"HEM_PARAMETERS": `{"threshold_box":"0.9","threshold_img":"0.9"}`,
				"LC_PERIOD":      "30",
				// The user's own entries stay.
				"input_shape": "416,736", "video_url": "rtsp://localhost/video",
				"all_examples_inference_output":       "/data/output",
				"hard_example_cloud_inference_output": "/data/hard_example_cloud_inference_output",
				"hard_example_edge_inference_output":  "/data/hard_example_edge_inference_output",
			}),
			wantPath: "/data/little-model",
		},
		"cloud worker": {
			deployment: cloudName,
			wantEnv: common.MergeLabels(shared, map[string]string{
				"MODEL_NAME":          "helmet-detection-inference-big-model",
				"MODEL_URL":           "/home/data/data/big-model/yolov3_darknet.pb",
				"BIG_MODEL_BIND_PORT": "5000",
				"ACCESS_KEY_ID":       "from secret s3-secret/ACCESS_KEY_ID",
				"SECRET_ACCESS_KEY":   "from secret s3-secret/SECRET_ACCESS_KEY",
				"input_shape":         "544,544",
			}),
			wantPath: "/data/big-model",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkWorkerDeployment(t, f, tc.deployment, tc.wantEnv, tc.wantPath)
		})
	}
	checkExampleService(t, f)
	checkExampleAutoscaler(t, f)
}

// checkWorkerDeployment: the example's worker Deployment is the service's,
// selects its role, runs one pod that restarts, with the environment and the
// model's host path wanted.
func checkWorkerDeployment(t *testing.T, f *fixture, deployment string, wantEnv map[string]string, wantPath string) {
	t.Helper()
	d := f.created(t, "deployments", deployment).(*appsv1.Deployment)
	if diff := cmp.Diff([]metav1.OwnerReference{ownerRef()}, d.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want,+got):\n%s", diff)
	}
	role := strings.TrimPrefix(deployment, jiName+"-deployment-")
	wantSelector := map[string]string{common.LabelOwnerUID: "ji-uid", common.LabelWorkerRole: role}
	if diff := cmp.Diff(wantSelector, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want,+got):\n%s", diff)
	}
	for k, v := range wantSelector {
		if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: Deployment %q, pod template %q; want %q", k, d.Labels[k], d.Spec.Template.Labels[k], v)
		}
	}
	if d.Spec.Template.Labels[common.LabelTemplateHash] == "" {
		t.Error("the pod template has no template-hash label")
	}
	if got := ptr.Deref(d.Spec.Replicas, -1); got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
	if got := d.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyAlways {
		t.Errorf("restart policy = %q, want Always", got)
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	if diff := cmp.Diff(wantEnv, envOf(containers[0])); diff != "" {
		t.Errorf("environment (-want,+got):\n%s", diff)
	}
	var hostPaths []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && strings.HasPrefix(v.Name, "nereid-data-") {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if diff := cmp.Diff([]string{wantPath}, hostPaths); diff != "" {
		t.Errorf("model host paths (-want,+got):\n%s", diff)
	}
}

// checkExampleService: the example's Service is the service's and reaches
// the cloud worker on Sedna's port.
func checkExampleService(t *testing.T, f *fixture) {
	t.Helper()
	svc := f.created(t, "services", serviceName).(*corev1.Service)
	if diff := cmp.Diff([]metav1.OwnerReference{ownerRef()}, svc.OwnerReferences); diff != "" {
		t.Errorf("service owner references (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{common.LabelOwnerUID: "ji-uid", common.LabelWorkerRole: roleCloud}, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-want,+got):\n%s", diff)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "tcp-0" || svc.Spec.Ports[0].Port != 5000 || svc.Spec.Ports[0].TargetPort.IntVal != 5000 {
		t.Errorf("service ports = %+v, want tcp-0, 5000 to 5000 (Sedna's)", svc.Spec.Ports)
	}
}

// checkExampleAutoscaler: the example's cloud worker scales on CPU, 1 to 3.
func checkExampleAutoscaler(t *testing.T, f *fixture) {
	t.Helper()
	hpa := f.created(t, "horizontalpodautoscalers", cloudHPA).(*autoscalingv2.HorizontalPodAutoscaler)
	wantHPA := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: cloudName},
		MinReplicas:    ptr.To[int32](1),
		MaxReplicas:    3,
		Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
				Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70),
			}},
		}},
	}
	if diff := cmp.Diff(wantHPA, hpa.Spec); diff != "" {
		t.Errorf("autoscaler spec (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{ownerRef()}, hpa.OwnerReferences); diff != "" {
		t.Errorf("autoscaler owner references (-want,+got):\n%s", diff)
	}
}

// followCase is one change to a settled service, the writes the next sync
// makes, and what else is checked after it.
type followCase struct {
	change     func(t *testing.T, f *fixture)
	wantWrites []string
	// statusSame: the service's status is not written either.
	statusSame bool
	check      func(t *testing.T, f *fixture)
}

func followSpecCases() map[string]followCase {
	cases := followEarlierChildrenCases()
	maps.Copy(cases, followTemplateCases())
	maps.Copy(cases, followAutoscalerCases())
	return cases
}

// followEarlierChildrenCases: no change, and children an earlier Nereid or
// Sedna made.
func followEarlierChildrenCases() map[string]followCase {
	return map[string]followCase{
		"an unchanged spec issues no write": {
			change:     func(*testing.T, *fixture) {},
			statusSame: true,
		},
		"a status-only write changes nothing": {
			statusSame: true,
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.Status.Metrics = []sednav1.Metric{{Key: "inferenceNumber", Value: "42"}}
				f.cache(t, ji)
			},
		},
		"a Deployment and autoscaler of an earlier Nereid's names are deleted": {
			change: func(t *testing.T, f *fixture) {
				d := cachedDeployment(t, f, edgeName).DeepCopy()
				d.Name, d.UID = jiName+"-edge", "old-uid"
				f.cache(t, d)
				h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: jiName + "-cloud", Namespace: ns, UID: "old-hpa",
					Labels: d.Labels, OwnerReferences: d.OwnerReferences}}
				f.cache(t, h)
			},
			wantWrites: []string{"delete deployments " + jiName + "-edge", "delete horizontalpodautoscalers " + jiName + "-cloud"},
		},
		"a Service of an earlier spec gets Sedna's port name": {
			change: func(t *testing.T, f *fixture) {
				svc, err := f.kube.CoreV1().Services(ns).Get(t.Context(), serviceName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				svc.Spec.Ports[0].Name = "inference"
				delete(svc.Labels, common.LabelTemplateHash)
				f.cache(t, svc)
			},
			wantWrites: []string{"update services " + serviceName},
		},
		// Sedna's Deployment selects Sedna's labels, and a selector cannot
		// change: its pods get Nereid's template with those labels too.
		"Sedna's Deployment of the same name is kept and its pods roll over": {
			change: func(t *testing.T, f *fixture) {
				sedna := map[string]string{"jointinferenceservice.sedna.io/uid": "ji-uid", "app.sedna.io": jiName + "-Edge-svc"}
				d := cachedDeployment(t, f, edgeName).DeepCopy()
				d.Labels = common.MergeLabels(sedna, common.OwnerLabels(&metav1.ObjectMeta{Name: jiName, UID: "ji-uid"}, "jointinferenceservice"),
					map[string]string{common.LabelAdoptedFrom: common.AdoptedFromSedna})
				d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sedna}
				d.Spec.Template.Labels = sedna
				f.cache(t, d)
			},
			wantWrites: []string{"update deployments " + edgeName},
			check: func(t *testing.T, f *fixture) {
				d := updatedDeployment(t, f, edgeName)
				if common.IsAdopted(d) || d.Spec.Template.Labels["app.sedna.io"] != jiName+"-Edge-svc" ||
					d.Spec.Template.Labels[common.LabelWorkerRole] != roleEdge || d.Spec.Template.Labels[common.LabelTemplateHash] == "" {
					t.Errorf("Sedna's Deployment updated to labels %v, template labels %v; want Nereid's, not adopted, with Sedna's selector in the template",
						d.Labels, d.Spec.Template.Labels)
				}
			},
		},
	}
}

// followTemplateCases: what changes the Deployments' templates or replicas.
func followTemplateCases() map[string]followCase {
	return map[string]followCase{
		"an edited hard example mining parameter updates the edge Deployment's template": {
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.Generation++
				ji.Spec.EdgeWorker.HardExampleMining.Parameters[0].Value = "0.5"
				f.cache(t, ji)
			},
			wantWrites: []string{"update deployments " + edgeName},
			check: func(t *testing.T, f *fixture) {
				d := updatedDeployment(t, f, edgeName)
				got := envOf(d.Spec.Template.Spec.Containers[0])["HEM_PARAMETERS"]
				if want := `{"threshold_box":"0.9","threshold_img":"0.5"}`; got != want {
					t.Errorf("HEM_PARAMETERS = %s, want %s", got, want)
				}
			},
		},
		"a Model moved updates the Deployment that serves it": {
			change: func(t *testing.T, f *fixture) {
				m, err := f.c.models.Models(ns).Get("helmet-detection-inference-big-model")
				if err != nil {
					t.Fatal(err)
				}
				m = m.DeepCopy()
				m.Spec.URL = "s3://models/big.pb"
				f.cache(t, m)
			},
			wantWrites: []string{"update deployments " + cloudName},
			check: func(t *testing.T, f *fixture) {
				d := updatedDeployment(t, f, cloudName)
				if got := envOf(d.Spec.Template.Spec.Containers[0])["MODEL_URL"]; got != "s3://models/big.pb" {
					t.Errorf("MODEL_URL = %s, want s3://models/big.pb", got)
				}
			},
		},
		"a Deployment deleted by hand is recreated": {
			change: func(t *testing.T, f *fixture) {
				d, err := appslisters.NewDeploymentLister(f.c.syncer.Deployments).Deployments(ns).Get(edgeName)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.indexers["Deployment"].Delete(d); err != nil {
					t.Fatal(err)
				}
				if err := f.kube.Tracker().Delete(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns, edgeName); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: []string{"create deployments " + edgeName},
		},
		"a Deployment scaled by hand without an autoscaler goes back to one replica": {
			change: func(t *testing.T, f *fixture) {
				d, err := appslisters.NewDeploymentLister(f.c.syncer.Deployments).Deployments(ns).Get(edgeName)
				if err != nil {
					t.Fatal(err)
				}
				d = d.DeepCopy()
				d.Spec.Replicas = ptr.To[int32](3)
				f.cache(t, d)
			},
			wantWrites: []string{"update deployments " + edgeName},
		},
		"a Deployment scaled by its autoscaler keeps its replicas": {
			change: func(t *testing.T, f *fixture) {
				d, err := appslisters.NewDeploymentLister(f.c.syncer.Deployments).Deployments(ns).Get(cloudName)
				if err != nil {
					t.Fatal(err)
				}
				d = d.DeepCopy()
				d.Spec.Replicas = ptr.To[int32](3)
				f.cache(t, d)
			},
		},
	}
}

// followAutoscalerCases: the autoscalers follow hpa; a service being deleted
// is left alone.
func followAutoscalerCases() map[string]followCase {
	return map[string]followCase{
		"hpa removed deletes the autoscaler": {
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.Generation++
				ji.Spec.CloudWorker.HPA = nil
				f.cache(t, ji)
			},
			wantWrites: []string{"delete horizontalpodautoscalers " + cloudHPA},
		},
		"hpa edited updates the autoscaler": {
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.Generation++
				ji.Spec.CloudWorker.HPA.MaxReplicas = 5
				f.cache(t, ji)
			},
			wantWrites: []string{"update horizontalpodautoscalers " + cloudHPA},
			check: func(t *testing.T, f *fixture) {
				for _, a := range f.kube.Actions() {
					if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" {
						if got := u.GetObject().(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas; got != 5 {
							t.Errorf("maxReplicas = %d, want 5", got)
						}
					}
				}
			},
		},
		"hpa added to the edge worker creates its autoscaler": {
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.Generation++
				ji.Spec.EdgeWorker.HPA = &sednav1.HPA{MinReplicas: ptr.To[int32](2), MaxReplicas: 4}
				f.cache(t, ji)
			},
			wantWrites: []string{"create horizontalpodautoscalers " + edgeHPA},
			check: func(t *testing.T, f *fixture) {
				hpa := f.created(t, "horizontalpodautoscalers", edgeHPA).(*autoscalingv2.HorizontalPodAutoscaler)
				got := [2]int32{ptr.Deref(hpa.Spec.MinReplicas, 0), hpa.Spec.MaxReplicas}
				if got != [2]int32{2, 4} {
					t.Errorf("min, max replicas = %v, want [2 4]", got)
				}
			},
		},
		"a service being deleted is left to the garbage collector": {
			change: func(t *testing.T, f *fixture) {
				ji := f.cachedService(t).DeepCopy()
				ji.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				ji.Spec.CloudWorker.HPA = nil
				f.cache(t, ji)
				if err := f.indexers["Service"].Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: serviceName}}); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
}

// TestJointInferenceServiceChildrenFollowTheSpec starts from a settled service
// (children created and cached, status written) and changes one thing.
func TestJointInferenceServiceChildrenFollowTheSpec(t *testing.T) {
	cases := followSpecCases()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ji, models := exampleObjects(t)
			f := newFixture(t, append(models, ji)...)
			f.settle(t)
			tc.change(t, f)
			if err := f.c.sync(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWrites, f.writes()); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
			if n := len(f.sedna.Actions()); tc.statusSame && n != 0 {
				t.Errorf("%d writes of the service, want none: %v", n, f.sedna.Actions())
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func cachedDeployment(t *testing.T, f *fixture, name string) *appsv1.Deployment {
	t.Helper()
	d, err := appslisters.NewDeploymentLister(f.c.syncer.Deployments).Deployments(ns).Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func updatedDeployment(t *testing.T, f *fixture, name string) *appsv1.Deployment {
	t.Helper()
	for _, a := range f.kube.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" {
			if d, ok := u.GetObject().(*appsv1.Deployment); ok && d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("deployment %s not updated", name)
	return nil
}

func TestJointInferenceServiceWaitsForMissingModel(t *testing.T) {
	cases := map[string]struct {
		drop        []string
		wantMessage string
	}{
		"edge model missing": {
			drop:        []string{"helmet-detection-inference-little-model"},
			wantMessage: "waiting for Model helmet-detection-inference-little-model: not found in namespace default",
		},
		"both models missing": {
			drop:        []string{"helmet-detection-inference-little-model", "helmet-detection-inference-big-model"},
			wantMessage: "waiting for Model helmet-detection-inference-little-model, Model helmet-detection-inference-big-model: not found in namespace default",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ji, models := exampleObjects(t)
			objs := []runtime.Object{ji}
			for _, m := range models {
				if !contains(tc.drop, m.(*sednav1.Model).Name) {
					objs = append(objs, m)
				}
			}
			f := newFixture(t, objs...)
			for i := range 2 {
				if err := f.c.sync(t.Context(), key); err != nil {
					t.Fatalf("sync %d: %v", i, err)
				}
				f.cache(t, f.storedService(t))
			}
			if diff := cmp.Diff([]string(nil), f.writes()); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
			cond := common.FindJobCondition(f.storedService(t).Status.Conditions, common.ConditionReferencesResolved)
			if cond == nil {
				t.Fatal("no ReferencesResolved condition")
			}
			want := sednav1.JobCondition{Type: common.ConditionReferencesResolved, Status: corev1.ConditionFalse, Reason: "MissingReference", Message: tc.wantMessage, ObservedGeneration: 1}
			if diff := cmp.Diff(want, *cond, ignoreTimes); diff != "" {
				t.Errorf("condition (-want,+got):\n%s", diff)
			}
			// Once, on the transition, not on every sync.
			wantEvents := []string{"Warning MissingReference " + tc.wantMessage}
			if diff := cmp.Diff(wantEvents, f.drainEvents()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

var ignoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.String()
	return strings.HasSuffix(s, "LastHeartbeatTime") || strings.HasSuffix(s, "LastTransitionTime")
}, cmp.Ignore())

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestJointInferenceServiceCreateFailureIsVisibleAndRetried(t *testing.T) {
	ji, models := exampleObjects(t)
	f := newFixture(t, append(models, ji)...)
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, edgeName,
		errors.New("exceeded quota: compute-resources"))
	f.kube.PrependReactor("create", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if name(a.(clienttesting.CreateAction).GetObject()) == edgeName {
			return true, nil, quota
		}
		return false, nil, nil
	})
	err := f.c.sync(t.Context(), key)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("sync returned %v, want the Forbidden error to retry with backoff", err)
	}
	cond := common.FindJobCondition(f.storedService(t).Status.Conditions, condWorkersCreated)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "CreateFailed" || !strings.Contains(cond.Message, "exceeded quota") {
		t.Errorf("WorkersCreated condition = %+v, want False CreateFailed naming the quota", cond)
	}
	var warnings []string
	for _, e := range f.drainEvents() {
		if strings.HasPrefix(e, "Warning ") {
			warnings = append(warnings, e)
		}
	}
	wantWarnings := []string{"Warning FailedCreate Error creating deployment " + edgeName + ": " + quota.Error()}
	if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
		t.Errorf("warning events (-want,+got):\n%s", diff)
	}
}

func TestJointInferenceServiceStatusFollowsDeployments(t *testing.T) {
	available := func(n int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	}
	stuck := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		Message: "ReplicaSet has timed out progressing.",
	}}}
	quota := appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: "pods is forbidden: exceeded quota",
	}}}
	type counts struct {
		Active, Failed        int32
		EdgeReady, CloudReady string
		Ready, FailedCnd      corev1.ConditionStatus
	}
	cases := map[string]struct {
		edge, cloud appsv1.DeploymentStatus
		want        counts
		wantEvents  []string
	}{
		"both available": {
			edge: available(1), cloud: available(1),
			want:       counts{Active: 2, EdgeReady: "1/1", CloudReady: "1/1", Ready: corev1.ConditionTrue},
			wantEvents: []string{"Normal Ready the edge and cloud workers are available: edge worker: 1 of 1 replicas available; cloud worker: 1 of 1 replicas available"},
		},
		"cloud still starting": {
			edge: available(1), cloud: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1},
			want: counts{Active: 1, EdgeReady: "1/1", CloudReady: "0/1", Ready: corev1.ConditionFalse},
		},
		"edge past its progress deadline": {
			edge: stuck, cloud: available(1),
			want:       counts{Active: 1, Failed: 1, EdgeReady: "0/1", CloudReady: "1/1", Ready: corev1.ConditionFalse, FailedCnd: corev1.ConditionTrue},
			wantEvents: []string{"Warning Failed Deployment " + edgeName + ": ReplicaSet has timed out progressing."},
		},
		"cloud refused by a quota": {
			edge: available(1), cloud: quota,
			want:       counts{Active: 1, Failed: 1, EdgeReady: "1/1", CloudReady: "0/1", Ready: corev1.ConditionFalse, FailedCnd: corev1.ConditionTrue},
			wantEvents: []string{"Warning Failed Deployment " + cloudName + ": pods is forbidden: exceeded quota"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ji, models := exampleObjects(t)
			f := newFixture(t, append(models, ji)...)
			f.settle(t)
			for d, st := range map[string]appsv1.DeploymentStatus{edgeName: tc.edge, cloudName: tc.cloud} {
				dep, err := appslisters.NewDeploymentLister(f.c.syncer.Deployments).Deployments(ns).Get(d)
				if err != nil {
					t.Fatal(err)
				}
				dep = dep.DeepCopy()
				dep.Generation, dep.Status = 1, st
				f.cache(t, dep)
			}
			if err := f.c.sync(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			status := f.storedService(t).Status
			got := counts{Active: status.Active, Failed: status.Failed, EdgeReady: status.EdgeReady, CloudReady: status.CloudReady}
			if c := common.FindJobCondition(status.Conditions, condReady); c != nil {
				got.Ready = c.Status
			}
			if c := common.FindJobCondition(status.Conditions, condFailed); c != nil {
				got.FailedCnd = c.Status
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if status.ObservedGeneration != 1 || status.StartTime == nil {
				t.Errorf("observedGeneration %d, startTime %v; want 1 and set", status.ObservedGeneration, status.StartTime)
			}
			for _, c := range status.Conditions {
				if c.ObservedGeneration != 1 {
					t.Errorf("condition %s has observedGeneration %d, want 1", c.Type, c.ObservedGeneration)
				}
			}
			if diff := cmp.Diff(tc.wantEvents, f.drainEvents()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			// The same state again writes nothing and says nothing.
			f.cache(t, f.storedService(t))
			f.sedna.ClearActions()
			if err := f.c.sync(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			if n := len(f.sedna.Actions()); n != 0 {
				t.Errorf("%d sedna writes on an unchanged state, want 0: %v", n, f.sedna.Actions())
			}
			if diff := cmp.Diff([]string(nil), f.drainEvents()); diff != "" {
				t.Errorf("events on an unchanged state (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestModelWakesServicesThatNameIt(t *testing.T) {
	cases := map[string]struct {
		model     string
		namespace string
		wantKeys  []string
	}{
		"the edge model":          {model: "helmet-detection-inference-little-model", namespace: ns, wantKeys: []string{key}},
		"the cloud model":         {model: "helmet-detection-inference-big-model", namespace: ns, wantKeys: []string{key}},
		"a model of another name": {model: "other", namespace: ns},
		"a namesake elsewhere":    {model: "helmet-detection-inference-big-model", namespace: "elsewhere"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ji, _ := exampleObjects(t)
			f := newFixture(t, ji)
			common.ReferenceHandler(f.c.jiIndexer, common.ByModel, f.c.queue.Add).OnAdd(&sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: tc.model, Namespace: tc.namespace}}, false)
			var got []string
			for f.c.queue.Len() > 0 {
				k, _ := f.c.queue.Get()
				got = append(got, k)
				f.c.queue.Done(k)
			}
			if diff := cmp.Diff(tc.wantKeys, got); diff != "" {
				t.Errorf("enqueued (-want,+got):\n%s", diff)
			}
		})
	}
}

// Of what Nereid sets, a template overrides what Sedna's GlobalManager does
// not set for the worker type (createOrUpdateWorker): MODEL_NAME of either
// worker (Sedna's answer_generation_inference example names its API's model
// there), and the cloud worker's LC_SERVER. A template's own entry is kept.
func TestJointInferenceWorkersKeepTheTemplatesOwnEnvironment(t *testing.T) {
	ji, objs := exampleObjects(t)
	f := newFixture(t, objs...)
	refs, missing, err := f.c.resolve(ji)
	if err != nil || len(missing) > 0 {
		t.Fatalf("resolving the example: missing %v, err %v", missing, err)
	}
	ji.Spec.CloudWorker.Template.Spec.Containers[0].Env = append(ji.Spec.CloudWorker.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "MODEL_NAME", Value: "deepseek-chat"}, corev1.EnvVar{Name: "BIG_MODEL_BIND_PORT", Value: "1"})
	edge, cloud, err := f.c.desiredWorkers(ji, refs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		roleEdge:  {"LOG_LEVEL", "MODEL_NAME", "NEREID_NODE_IP", "LC_SERVER", "LC_PERIOD"},
		roleCloud: {"LOG_LEVEL", "MODEL_NAME", "NEREID_NODE_IP", "LC_SERVER"},
	}
	for _, w := range []common.Worker{edge, cloud} {
		if diff := cmp.Diff(want[w.Role], w.Defaults()); diff != "" {
			t.Errorf("%s worker: what a template overrides (-want,+got):\n%s", w.Role, diff)
		}
	}
	got := envOf(common.NewWorkerTemplate(ji, serviceKind, cloud).Spec.Containers[0])
	if got["MODEL_NAME"] != "deepseek-chat" || got["BIG_MODEL_BIND_PORT"] != "5000" || got["SERVICE_NAME"] != ji.Name {
		t.Errorf("cloud worker's MODEL_NAME %q, BIG_MODEL_BIND_PORT %q, SERVICE_NAME %q; want the template's deepseek-chat, and Sedna's 5000 and %s",
			got["MODEL_NAME"], got["BIG_MODEL_BIND_PORT"], got["SERVICE_NAME"], ji.Name)
	}
}
