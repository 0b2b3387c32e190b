package edgehub

import (
	"strings"
	"time"

	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const testNS = "default"

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: testNS, ResourceVersion: "1"}
}

func onNodeTemplate(node string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "w", Image: "w"}}}}
}

func dataset(name, node string) *sednav1.Dataset {
	return &sednav1.Dataset{ObjectMeta: meta(name), Spec: sednav1.DatasetSpec{URL: "/data/" + name, Format: "txt", NodeName: node}}
}

func model(name string) *sednav1.Model {
	return &sednav1.Model{ObjectMeta: meta(name), Spec: sednav1.ModelSpec{URL: "/models/" + name, Format: "pb"}}
}

func federatedJob(name, aggregationNode string, trainingNodes ...string) *sednav1.FederatedLearningJob {
	j := &sednav1.FederatedLearningJob{ObjectMeta: meta(name)}
	j.Spec.AggregationWorker = sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: name + "-model"}, Template: onNodeTemplate(aggregationNode)}
	for i, n := range trainingNodes {
		j.Spec.TrainingWorkers = append(j.Spec.TrainingWorkers, sednav1.TrainingWorker{
			Dataset: sednav1.DatasetRef{Name: name + "-data-" + string(rune('0'+i))}, Template: onNodeTemplate(n)})
	}
	return j
}

func jointService(name, edgeNode, cloudNode string) *sednav1.JointInferenceService {
	s := &sednav1.JointInferenceService{ObjectMeta: meta(name)}
	s.Spec.EdgeWorker = sednav1.EdgeWorker{Model: sednav1.ModelRef{Name: name + "-small"}, Template: onNodeTemplate(edgeNode),
		HardExampleMining: sednav1.HardExampleMining{Name: "IBT"}}
	s.Spec.CloudWorker = sednav1.CloudWorker{Model: sednav1.ModelRef{Name: name + "-big"}, Template: onNodeTemplate(cloudNode)}
	return s
}

func incrementalJob(name, datasetName string, stageNodes ...string) *sednav1.IncrementalLearningJob {
	j := &sednav1.IncrementalLearningJob{ObjectMeta: meta(name)}
	j.Spec.Dataset = sednav1.CycleDataset{Name: datasetName, TrainProb: 0.8}
	j.Spec.InitialModel = sednav1.ModelRef{Name: name + "-initial"}
	j.Spec.DeploySpec.Model = sednav1.DeployModel{Name: name + "-deploy"}
	j.Spec.EvalSpec.InitialEvalModel = &sednav1.ModelRef{Name: name + "-eval"}
	j.Spec.OutputDir = "/output"
	nodes := append(stageNodes, "", "", "")
	j.Spec.TrainSpec.Template = onNodeTemplate(nodes[0])
	j.Spec.EvalSpec.Template = onNodeTemplate(nodes[1])
	j.Spec.DeploySpec.Template = onNodeTemplate(nodes[2])
	return j
}

func lifelongJob(name, datasetName string, stageNodes ...string) *sednav1.LifelongLearningJob {
	j := &sednav1.LifelongLearningJob{ObjectMeta: meta(name)}
	j.Spec.Dataset = sednav1.CycleDataset{Name: datasetName, TrainProb: 0.8}
	j.Spec.OutputDir = "/output"
	nodes := append(stageNodes, "", "", "")
	j.Spec.TrainSpec.Template = onNodeTemplate(nodes[0])
	j.Spec.EvalSpec.Template = onNodeTemplate(nodes[1])
	j.Spec.DeploySpec.Template = onNodeTemplate(nodes[2])
	return j
}

func TestDesiredSelectsWhatANodeRunsAndWhatItNames(t *testing.T) {
	withPretrained := federatedJob("fl-pre", "cloud", "edge-b")
	withPretrained.Spec.PretrainedModel = &sednav1.ModelRef{Name: "fl-pre-start"}
	noEvalModel := incrementalJob("il-noeval", "data-b", "edge-b")
	noEvalModel.Spec.EvalSpec.InitialEvalModel = nil
	otherNS := dataset("data-a", "edge-a")
	otherNS.Namespace = "other"

	// A job whose worker the scheduler placed (no nodeName in its template).
	scheduled := federatedJob("fl-sched", "cloud", "")
	scheduled.UID = "uid-fl-sched"
	all := objects{
		datasets: []*sednav1.Dataset{dataset("data-a", "edge-a"), dataset("data-b", "edge-b"), otherNS},
		pods: []*corev1.Pod{
			withIPs(workerPod("fl-sched-train-0", "uid-fl-sched", "edge-d"), corev1.PodRunning, "10.1.0.5", "fd00::5"),
			withIPs(workerPod("fl-sched-train-1", "uid-fl-sched", "edge-d"), corev1.PodSucceeded, "10.1.0.6"),
			workerPod("fl-sched-agg", "uid-fl-sched", "cloud"),
			workerPod("stray", "uid-nobody", "edge-d"),
			forgedPod("forged", "uid-fl-sched", "edge-d"),
		},
		models: []*sednav1.Model{
			model("fl-a-model"), model("fl-b-model"), model("fl-pre-model"), model("fl-pre-start"),
			model("ji-a-small"), model("ji-a-big"), model("ji-cloud-small"), model("ji-cloud-big"),
			model("il-a-initial"), model("il-a-deploy"), model("il-a-eval"),
			model("il-stage-initial"), model("il-stage-deploy"), model("il-stage-eval"),
			model("il-noeval-initial"), model("il-noeval-deploy"), model("il-noeval-eval"),
			model("unreferenced"), model("fl-sched-model"),
		},
		federatedLearningJobs: []*sednav1.FederatedLearningJob{
			federatedJob("fl-a", "cloud", "edge-a", "edge-b"), // a training worker on edge-a
			federatedJob("fl-b", "cloud", "edge-b"),
			withPretrained,
			federatedJob("fl-agg", "edge-c", "edge-b"), // the aggregator on edge-c
			scheduled,
		},
		jointInferenceServices: []*sednav1.JointInferenceService{
			jointService("ji-a", "edge-a", "cloud"),
			jointService("ji-cloud", "edge-b", "edge-c"), // the cloud worker pinned to edge-c
		},
		incrementalJobs: []*sednav1.IncrementalLearningJob{
			incrementalJob("il-a", "data-a"),                       // by its dataset
			incrementalJob("il-stage", "data-b", "", "", "edge-a"), // by its deploy stage
			incrementalJob("il-missing-dataset", "nowhere"),
			noEvalModel,
		},
		lifelongJobs: []*sednav1.LifelongLearningJob{
			lifelongJob("ll-a", "data-a"),
			lifelongJob("ll-stage", "data-b", "", "edge-c"),
			lifelongJob("ll-b", "data-b"),
		},
	}

	tests := map[string]struct {
		node string
		objs objects
		want []string
	}{
		"edge-a: its dataset, the jobs it runs workers of and their models": {
			node: "edge-a",
			objs: all,
			want: []string{
				"Dataset default/data-a",
				"Dataset other/data-a",
				"FederatedLearningJob default/fl-a",
				"IncrementalLearningJob default/il-a",
				"IncrementalLearningJob default/il-stage",
				"JointInferenceService default/ji-a",
				"LifelongLearningJob default/ll-a",
				"Model default/fl-a-model",
				"Model default/il-a-deploy",
				"Model default/il-a-eval",
				"Model default/il-a-initial",
				"Model default/il-stage-deploy",
				"Model default/il-stage-eval",
				"Model default/il-stage-initial",
				"Model default/ji-a-big",
				"Model default/ji-a-small",
			},
		},
		"edge-b: a pretrained model counts; an unset eval model or a missing model does not": {
			node: "edge-b",
			objs: all,
			want: []string{
				"Dataset default/data-b",
				"FederatedLearningJob default/fl-a",
				"FederatedLearningJob default/fl-agg",
				"FederatedLearningJob default/fl-b",
				"FederatedLearningJob default/fl-pre",
				"IncrementalLearningJob default/il-noeval",
				"IncrementalLearningJob default/il-stage",
				"JointInferenceService default/ji-cloud",
				"LifelongLearningJob default/ll-b",
				"LifelongLearningJob default/ll-stage",
				"Model default/fl-a-model",
				"Model default/fl-b-model",
				"Model default/fl-pre-model",
				"Model default/fl-pre-start",
				"Model default/il-noeval-deploy",
				"Model default/il-noeval-initial",
				"Model default/il-stage-deploy",
				"Model default/il-stage-eval",
				"Model default/il-stage-initial",
				"Model default/ji-cloud-big",
				"Model default/ji-cloud-small",
			},
		},
		"edge-c: an aggregator or a cloud worker pinned to an edge node counts": {
			node: "edge-c",
			objs: all,
			want: []string{
				"FederatedLearningJob default/fl-agg",
				"JointInferenceService default/ji-cloud",
				"LifelongLearningJob default/ll-stage",
				"Model default/ji-cloud-big",
				"Model default/ji-cloud-small",
			},
		},
		"edge-d: a job whose pods the scheduler bound there, with their names and addresses (a finished pod's none)": {
			node: "edge-d",
			objs: all,
			want: []string{
				"FederatedLearningJob default/fl-sched [fl-sched-train-0@10.1.0.5,fd00::5 fl-sched-train-1@ done]",
				"Model default/fl-sched-model",
			},
		},
		"a node nothing names":                            {node: "edge-z", objs: all, want: nil},
		"an empty node name matches no unpinned template": {node: "", objs: all, want: nil},
		"a dataset in another namespace does not bring a job": {
			node: "edge-a",
			objs: objects{datasets: []*sednav1.Dataset{otherNS}, incrementalJobs: []*sednav1.IncrementalLearningJob{incrementalJob("il-a", "data-a")}},
			want: []string{"Dataset other/data-a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := seededHub(t, tc.objs)
			var got []string
			for ref, d := range h.desired(tc.node) {
				if ref.Namespace != d.obj.GetNamespace() || ref.Name != d.obj.GetName() {
					t.Errorf("ref %s holds object %s/%s", ref, d.obj.GetNamespace(), d.obj.GetName())
				}
				line := ref.String()
				if len(d.workers) > 0 {
					var ws []string
					for _, w := range d.workers {
						line := w.Name + "@" + strings.Join(w.IPs, ",")
						if w.Done {
							line += " done"
						}
						ws = append(ws, line)
					}
					line += fmt.Sprintf(" %v", ws)
				}
				if d.version.workers != edgeproto.WorkersDigest(d.workers) {
					t.Errorf("%s: version %+v does not carry the digest of its workers", ref, d.version)
				}
				got = append(got, line)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired(%q) (-want,+got):\n%s", tc.node, diff)
			}
		})
	}
}

// objects are what seededHub puts into the hub's caches.
type objects struct {
	datasets               []*sednav1.Dataset
	models                 []*sednav1.Model
	federatedLearningJobs  []*sednav1.FederatedLearningJob
	jointInferenceServices []*sednav1.JointInferenceService
	incrementalJobs        []*sednav1.IncrementalLearningJob
	lifelongJobs           []*sednav1.LifelongLearningJob
	pods                   []*corev1.Pod
	replicaSets            []*appsv1.ReplicaSet
	deployments            []*appsv1.Deployment
}

// seededHub is a hub, not running, whose informers' caches hold objs.
func seededHub(t *testing.T, objs objects) *Hub {
	t.Helper()
	sedna := sednafake.NewSimpleClientset()
	factory := sednainformers.NewSharedInformerFactory(sedna, 0)
	kube := kubefake.NewClientset()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	workers := WorkerCaches{Pods: kubeFactory.Core().V1().Pods(), ReplicaSets: kubeFactory.Apps().V1().ReplicaSets(), Deployments: kubeFactory.Apps().V1().Deployments()}
	h, err := New(t.Context(), kube, sedna, factory, kinds.All(), workers, reports.Appliers{}, record.NewFakeRecorder(10), nil, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, h, sednav1.DatasetKind.Kind, objs.datasets)
	addAll(t, h, sednav1.ModelKind.Kind, objs.models)
	addAll(t, h, sednav1.FederatedLearningJobKind.Kind, objs.federatedLearningJobs)
	addAll(t, h, sednav1.JointInferenceServiceKind.Kind, objs.jointInferenceServices)
	addAll(t, h, sednav1.IncrementalLearningJobKind.Kind, objs.incrementalJobs)
	addAll(t, h, sednav1.LifelongLearningJobKind.Kind, objs.lifelongJobs)
	for _, p := range objs.pods {
		if err := h.pods.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range objs.replicaSets {
		if err := h.chain.ReplicaSets.Add(rs); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range objs.deployments {
		if err := h.chain.Deployments.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// withIPs gives pod a phase and addresses.
func withIPs(pod *corev1.Pod, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	pod.Status.Phase = phase
	for i, ip := range ips {
		if i == 0 {
			pod.Status.PodIP = ip
		}
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return pod
}

// setController makes obj controlled by owner, of kind.
func setController(obj metav1.Object, apiVersion, kind string, owner metav1.Object) {
	controller := true
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &controller}})
}

// A service's pod is its worker through the chain Nereid made, UIDs checked
// at each link: the service controls a Deployment, which controls a
// ReplicaSet, which controls the pod. A pod with the service's label under
// anything else is nobody's worker: it brings the service to no node and
// reports for nothing.
func TestAServicesWorkersAreFoundThroughItsOwnDeployment(t *testing.T) {
	svc := jointService("ji", "", "cloud")
	svc.UID = "uid-ji"
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "ji-edge", Namespace: testNS, UID: "uid-deploy",
		Labels: map[string]string{common.LabelOwnerUID: "uid-ji"}}}
	setController(deploy, "sedna.io/v1alpha1", "JointInferenceService", svc)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "ji-edge-abc", Namespace: testNS, UID: "uid-rs",
		Labels: map[string]string{common.LabelOwnerUID: "uid-ji"}}}
	setController(rs, "apps/v1", "Deployment", deploy)
	// A user's own Deployment and ReplicaSet, copying the labels.
	userDeploy := deploy.DeepCopy()
	userDeploy.Name, userDeploy.UID, userDeploy.OwnerReferences = "mine", "uid-mine", nil
	userRS := rs.DeepCopy()
	userRS.Name, userRS.UID = "mine-abc", "uid-mine-rs"
	setController(userRS, "apps/v1", "Deployment", userDeploy)
	bareRS := rs.DeepCopy()
	bareRS.Name, bareRS.UID, bareRS.OwnerReferences = "bare", "uid-bare", nil
	// A ReplicaSet naming the service's Deployment by name with another UID.
	staleRS := rs.DeepCopy()
	staleRS.Name, staleRS.UID = "stale", "uid-stale"
	staleRS.OwnerReferences[0].UID = "uid-old-deploy"

	pod := func(name, node string, owner *appsv1.ReplicaSet) *corev1.Pod {
		p := withIPs(workerPod(name, "uid-ji", node), corev1.PodRunning, "10.1.0.9")
		setController(p, "apps/v1", "ReplicaSet", owner)
		return p
	}
	h := seededHub(t, objects{
		jointInferenceServices: []*sednav1.JointInferenceService{svc},
		deployments:            []*appsv1.Deployment{deploy, userDeploy},
		replicaSets:            []*appsv1.ReplicaSet{rs, userRS, bareRS, staleRS},
		pods: []*corev1.Pod{
			pod("ji-edge-abc-1", "edge-0", rs),
			pod("mine-abc-1", "edge-1", userRS), pod("bare-1", "edge-1", bareRS), pod("stale-1", "edge-1", staleRS),
		},
	})
	ref := edgeproto.ObjectRef{Kind: sednav1.JointInferenceServiceKind.Kind, Namespace: testNS, Name: "ji"}
	d, ok := h.desired("edge-0")[ref]
	if want := []edgeproto.Worker{{Name: "ji-edge-abc-1", IPs: []string{"10.1.0.9"}}}; !ok || !cmp.Equal(d.workers, want) {
		t.Errorf("edge-0, where the service's own pod runs: sent %v with workers %v, want %v", ok, d.workers, want)
	}
	if _, ok := h.desired("edge-1")[ref]; ok {
		t.Errorf("edge-1, where only pods of other ReplicaSets carry the service's label, is sent the service")
	}
	k := h.byName[sednav1.JointInferenceServiceKind.Kind]
	for _, worker := range []string{"mine-abc-1", "bare-1", "stale-1"} {
		if err := h.checkWorker("edge-1", k, svc, worker, "10.1.0.9", time.Now()); err == nil {
			t.Errorf("a report of %s, a pod with the service's label that is not its worker, was taken", worker)
		}
	}
	if err := h.checkWorker("edge-0", k, svc, "ji-edge-abc-1", "10.1.0.9", time.Now()); err != nil {
		t.Errorf("a report of the service's own pod, from its address: %v", err)
	}
	if err := h.checkWorker("edge-0", k, svc, "ji-edge-abc-1", "10.1.0.10", time.Now()); err == nil {
		t.Errorf("a report of the service's own pod that the LocalController says came from another address was taken")
	}
	if err := h.checkWorker("edge-0", k, svc, edgeproto.LocalControllerWorker, "", time.Now()); err == nil {
		t.Errorf("a report under the LocalController's own name was taken for a joint inference service")
	}
}

// A finished worker's report taken before it finished applies; one taken
// after, from its address, may be another pod's that got the address.
func TestAFinishedWorkersAddressCountsOnlyUntilItFinished(t *testing.T) {
	job := federatedJob("fl", "cloud", "edge-0")
	job.UID = "uid-fl"
	pod := withIPs(workerPod("fl-train-0", "uid-fl", "edge-0"), corev1.PodSucceeded, "10.1.0.7")
	done := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(done)}}}}
	h := seededHub(t, objects{federatedLearningJobs: []*sednav1.FederatedLearningJob{job}, pods: []*corev1.Pod{pod}})
	k := h.byName[sednav1.FederatedLearningJobKind.Kind]
	if err := h.checkWorker("edge-0", k, job, "fl-train-0", "10.1.0.7", done.Add(-time.Second)); err != nil {
		t.Errorf("its last report, taken before it finished: %v", err)
	}
	if err := h.checkWorker("edge-0", k, job, "fl-train-0", "10.1.0.7", done.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "after the pod finished") {
		t.Errorf("a report taken a minute after it finished: %v, want refused", err)
	}
}

// forgedPod carries owner's label on node, but no controller reference.
func forgedPod(name, owner, node string) *corev1.Pod {
	p := workerPod(name, owner, node)
	p.OwnerReferences = nil
	return p
}

func TestAPodInAnotherNamespaceDoesNotHideAnOwnersPods(t *testing.T) {
	job := federatedJob("fl-sched", "cloud", "")
	job.UID = "uid-fl-sched"
	// Pods elsewhere on the node that name the job's UID, as anyone who may
	// create pods in another namespace can make them.
	var forged []*corev1.Pod
	for _, ns := range []string{"other-1", "other-2", "other-3"} {
		p := workerPod("forged", "uid-fl-sched", "edge-d")
		p.Namespace = ns
		forged = append(forged, p)
	}
	h := seededHub(t, objects{
		pods:                  append(forged, workerPod("fl-sched-train-0", "uid-fl-sched", "edge-d")),
		federatedLearningJobs: []*sednav1.FederatedLearningJob{job},
	})
	want := edgeproto.ObjectRef{Kind: sednav1.FederatedLearningJobKind.Kind, Namespace: testNS, Name: "fl-sched"}
	// The pods on a node come from a set, in no fixed order: look often
	// enough that the forged ones come first in some of the tries.
	for range 20 {
		if _, ok := h.desired("edge-d")[want]; !ok {
			t.Fatalf("edge-d's set lacks %s, whose pod runs there", want)
		}
	}
}

func TestAnEventOnAJobReachesTheNodesItsPodsAreBoundTo(t *testing.T) {
	job := federatedJob("fl-sched", "cloud", "") // a training worker the scheduler placed
	job.UID = "uid-fl-sched"
	elsewhere := workerPod("forged", "uid-fl-sched", "edge-x")
	elsewhere.Namespace = "other"
	h := seededHub(t, objects{
		pods:                  []*corev1.Pod{workerPod("fl-sched-train-0", "uid-fl-sched", "edge-d"), workerPod("unbound", "uid-fl-sched", ""), elsewhere},
		federatedLearningJobs: []*sednav1.FederatedLearningJob{job},
	})
	got := h.affectedNodes(h.byName[sednav1.FederatedLearningJobKind.Kind], job)
	slices.Sort(got)
	if want := []string{"cloud", "edge-d"}; !slices.Equal(got, want) {
		t.Errorf("affectedNodes = %q, want %q: its template's node and where its pod is bound, not a pod elsewhere naming its UID", got, want)
	}
}

// addAll puts objs into the cache of kind's informer.
func addAll[T any](t *testing.T, h *Hub, kind string, objs []T) {
	t.Helper()
	for _, o := range objs {
		if err := h.byName[kind].informer.GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

// workerPod is a worker pod of the object with UID owner, bound to node: it
// carries the owner label and a controller reference to the owner.
func workerPod(name, owner, node string) *corev1.Pod {
	controller := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{common.LabelOwnerUID: owner},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "sedna.io/v1alpha1", Kind: "Owner", Name: "owner", UID: types.UID(owner), Controller: &controller}}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}
