package gang

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// The job every test plans the gang of, and the names derived from it.
const (
	testNamespace = "ns"
	testJobName   = "train"
	testJobUID    = "uid-train"
	// testGroupName is <job>-<lower-case kind>, as docs/gang-scheduling.md documents.
	testGroupName = "train-federatedlearningjob"
)

var testKind = sednav1.FederatedLearningJobKind

func newJob(annotations, labels map[string]string) *sednav1.FederatedLearningJob {
	return &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{
		Name: testJobName, Namespace: testNamespace, UID: testJobUID, Generation: 3,
		Annotations: annotations, Labels: labels,
	}}
}

// What discovery says for each gang API, written out rather than derived
// from the package's own GroupVersionResources so a wrong one is caught.
var (
	kubernetesAPI = &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{
		{Name: "workloads", Namespaced: true, Kind: "Workload"},
		{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
		{Name: "podgroups/status", Namespaced: true, Kind: "PodGroup"},
	}}
	// podGroupsOnlyAPI is scheduling.k8s.io/v1beta1 without workloads.
	podGroupsOnlyAPI = &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{
		{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
		{Name: "podgroups/status", Namespaced: true, Kind: "PodGroup"},
	}}
	volcanoAPI = &metav1.APIResourceList{GroupVersion: "scheduling.volcano.sh/v1beta1", APIResources: []metav1.APIResource{
		{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
		{Name: "queues", Kind: "Queue"},
	}}
	coschedulingAPI = &metav1.APIResourceList{GroupVersion: "scheduling.x-k8s.io/v1alpha1", APIResources: []metav1.APIResource{
		{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
		{Name: "elasticquotas", Namespaced: true, Kind: "ElasticQuota"},
	}}
)

var (
	volcanoGVR      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
)

// cluster is a fake API server and a Manager on it.
type cluster struct {
	kube     *kubefake.Clientset
	dynamic  *dynamicfake.FakeDynamicClient
	recorder *record.FakeRecorder
	children *common.Children
	m        *Manager
}

// clusterConfig is what a test's fake API server holds.
type clusterConfig struct {
	flag       Mode
	apis       []*metav1.APIResourceList
	rediscover time.Duration
	clock      clock.PassiveClock // nil: the real clock
	// kube and dynamic are objects the API server has at start.
	kube    []runtime.Object
	dynamic []runtime.Object
}

// newCluster makes the fakes and a Manager on them, without starting its caches.
func newCluster(t *testing.T, cfg clusterConfig) *cluster {
	t.Helper()
	kube := kubefake.NewClientset(cfg.kube...)
	kube.Resources = cfg.apis
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		volcanoGVR:      "PodGroupList",
		coschedulingGVR: "PodGroupList",
	}, cfg.dynamic...)
	m, err := NewManager(testContext(t), Config{Mode: cfg.flag, Kube: kube, Dynamic: dyn, Discovery: kube.Discovery(), Namespace: testNamespace, Rediscover: cfg.rediscover, clock: cfg.clock})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	recorder := record.NewFakeRecorder(100)
	return &cluster{
		kube: kube, dynamic: dyn, recorder: recorder, m: m,
		children: &common.Children{Client: kube, Recorder: recorder, Expectations: common.NewExpectations(), Controller: "test"},
	}
}

// startCluster is newCluster with the Manager's caches started and filled.
func startCluster(t *testing.T, cfg clusterConfig) *cluster {
	t.Helper()
	c := newCluster(t, cfg)
	c.m.Start(t.Context())
	t.Cleanup(c.m.Shutdown) // after t.Context() is cancelled
	testwait.Eventually(t, 10*time.Second, "the gang caches to fill", func(context.Context) (bool, error) { return c.m.HasSynced(), nil })
	return c
}

// setAPIs changes what discovery says, as installing a scheduler would.
func (c *cluster) setAPIs(apis ...*metav1.APIResourceList) {
	c.kube.Lock()
	defer c.kube.Unlock()
	c.kube.Resources = apis
}

// events drains the events recorded so far.
func (c *cluster) events() []string {
	var out []string
	for {
		select {
		case e := <-c.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes counts the create and update requests the fakes received.
func (c *cluster) writes() (creates, updates int) {
	count := func(actions []k8stesting.Action) {
		for _, a := range actions {
			switch a.GetVerb() {
			case "create":
				creates++
			case "update":
				updates++
			}
		}
	}
	count(c.kube.Actions())
	count(c.dynamic.Actions())
	return creates, updates
}

// testContext is t.Context() logging to the test's log.
func testContext(t *testing.T) context.Context {
	return klog.NewContext(t.Context(), ktesting.NewLogger(t, ktesting.NewConfig()))
}

// cached says whether the Manager's cache of mode holds the group object
// named name with the gang minimum min, so the next Ensure reads it.
func (c *cluster) cached(mode Mode, name string, min int64) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		switch mode {
		case Kubernetes:
			w, err := c.m.workloads().Workloads(testNamespace).Get(name)
			if err != nil || len(w.Spec.PodGroupTemplates) == 0 || w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang == nil ||
				int64(w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount) != min {
				return false, nil
			}
			pg, err := c.m.podGroups().PodGroups(testNamespace).Get(name)
			return err == nil && pg.Spec.SchedulingPolicy.Gang != nil && int64(pg.Spec.SchedulingPolicy.Gang.MinCount) == min, nil
		default:
			lister, err := c.m.dynamicLister(resources(mode)[0])
			if err != nil {
				return false, nil
			}
			obj, err := lister.ByNamespace(testNamespace).Get(name)
			if err != nil {
				return false, nil
			}
			got, _, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "minMember")
			return got == min, nil
		}
	}
}

// getUnstructured reads a PodGroup of Volcano or coscheduling from the fake API server.
func (c *cluster) getUnstructured(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := c.dynamic.Resource(gvr).Namespace(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s: %v", gvr.Resource, name, err)
	}
	return u
}

// workerSpec is a pod template's spec requesting cpu and memory.
func workerSpec(cpu, memory string) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{
		Name: "worker", Image: "worker:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		}},
	}}}
}

// members is n pods of 500m cpu and 1Gi.
func members(n int32) Members {
	var m Members
	m.Add(workerSpec("500m", "1Gi"), n)
	return m
}

// pod is a pod of the job: in the plan's group, on node ("" when not
// placed), and with the scheduler's PodScheduled=False message when says is set.
func pod(p *Plan, name, node, says string) *corev1.Pod {
	po := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}}
	p.Decorate(po, Members{Count: 1})
	po.Spec.NodeName = node
	if says != "" {
		po.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: says,
		}}
	}
	return po
}

// otherOwnerRef is a controller reference to someone else's object.
func otherOwnerRef() []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(
		&sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"}}, testKind)}
}
