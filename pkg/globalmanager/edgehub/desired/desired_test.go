package desired

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
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// desiredCase is a node, the objects in the caches, and what the node's
// desired set holds: a line per object, with its workers.
type desiredCase struct {
	node string
	objs objects
	want []string
}

// datasetInOtherNamespace is other/data-a, on edge-a.
func datasetInOtherNamespace() *sednav1.Dataset {
	d := edgehubtest.Dataset("data-a", "edge-a")
	d.Namespace = "other"
	return d
}

// desiredObjects are the caches' objects the cases share: jobs of each kind,
// pinned, scheduled or found by their datasets, and the Models they name.
func desiredObjects() objects {
	withPretrained := edgehubtest.FederatedJob("fl-pre", "cloud", "edge-b")
	withPretrained.Spec.PretrainedModel = &sednav1.ModelRef{Name: "fl-pre-start"}
	noEvalModel := edgehubtest.IncrementalJob("il-noeval", "data-b", "edge-b")
	noEvalModel.Spec.EvalSpec.InitialEvalModel = nil
	otherNS := datasetInOtherNamespace()

	// A job whose worker the scheduler placed (no nodeName in its template).
	scheduled := edgehubtest.FederatedJob("fl-sched", "cloud", "")
	scheduled.UID = "uid-fl-sched"
	return objects{
		datasets: []*sednav1.Dataset{edgehubtest.Dataset("data-a", "edge-a"), edgehubtest.Dataset("data-b", "edge-b"), otherNS},
		pods: []*corev1.Pod{
			withIPs(edgehubtest.WorkerPod("fl-sched-train-0", "uid-fl-sched", "edge-d"), corev1.PodRunning, "10.1.0.5", "fd00::5"),
			withIPs(edgehubtest.WorkerPod("fl-sched-train-1", "uid-fl-sched", "edge-d"), corev1.PodSucceeded, "10.1.0.6"),
			edgehubtest.WorkerPod("fl-sched-agg", "uid-fl-sched", "cloud"),
			edgehubtest.WorkerPod("stray", "uid-nobody", "edge-d"),
			edgehubtest.ForgedPod("forged", "uid-fl-sched", "edge-d"),
		},
		models: []*sednav1.Model{
			edgehubtest.Model("fl-a-model"), edgehubtest.Model("fl-b-model"), edgehubtest.Model("fl-pre-model"), edgehubtest.Model("fl-pre-start"),
			edgehubtest.Model("ji-a-small"), edgehubtest.Model("ji-a-big"), edgehubtest.Model("ji-cloud-small"), edgehubtest.Model("ji-cloud-big"),
			edgehubtest.Model("il-a-initial"), edgehubtest.Model("il-a-deploy"), edgehubtest.Model("il-a-eval"),
			edgehubtest.Model("il-stage-initial"), edgehubtest.Model("il-stage-deploy"), edgehubtest.Model("il-stage-eval"),
			edgehubtest.Model("il-noeval-initial"), edgehubtest.Model("il-noeval-deploy"), edgehubtest.Model("il-noeval-eval"),
			edgehubtest.Model("unreferenced"), edgehubtest.Model("fl-sched-model"),
		},
		federatedLearningJobs: []*sednav1.FederatedLearningJob{
			edgehubtest.FederatedJob("fl-a", "cloud", "edge-a", "edge-b"), // a training worker on edge-a
			edgehubtest.FederatedJob("fl-b", "cloud", "edge-b"),
			withPretrained,
			edgehubtest.FederatedJob("fl-agg", "edge-c", "edge-b"), // the aggregator on edge-c
			scheduled,
		},
		jointInferenceServices: []*sednav1.JointInferenceService{
			edgehubtest.JointService("ji-a", "edge-a", "cloud"),
			edgehubtest.JointService("ji-cloud", "edge-b", "edge-c"), // the cloud worker pinned to edge-c
		},
		incrementalJobs: []*sednav1.IncrementalLearningJob{
			edgehubtest.IncrementalJob("il-a", "data-a"),                       // by its dataset
			edgehubtest.IncrementalJob("il-stage", "data-b", "", "", "edge-a"), // by its deploy stage
			edgehubtest.IncrementalJob("il-missing-dataset", "nowhere"),
			noEvalModel,
		},
		lifelongJobs: []*sednav1.LifelongLearningJob{
			edgehubtest.LifelongJob("ll-a", "data-a"),
			edgehubtest.LifelongJob("ll-stage", "data-b", "", "edge-c"),
			edgehubtest.LifelongJob("ll-b", "data-b"),
		},
	}
}

func desiredCases() map[string]desiredCase {
	all, otherNS := desiredObjects(), datasetInOtherNamespace()
	return map[string]desiredCase{
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
			objs: objects{datasets: []*sednav1.Dataset{otherNS}, incrementalJobs: []*sednav1.IncrementalLearningJob{edgehubtest.IncrementalJob("il-a", "data-a")}},
			want: []string{"Dataset other/data-a"},
		},
	}
}

func TestDesiredSelectsWhatANodeRunsAndWhatItNames(t *testing.T) {
	tests := desiredCases()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := seededSets(t, tc.objs)
			var got []string
			for ref, d := range s.Of(tc.node) {
				if ref.Namespace != d.Obj.GetNamespace() || ref.Name != d.Obj.GetName() {
					t.Errorf("ref %s holds object %s/%s", ref, d.Obj.GetNamespace(), d.Obj.GetName())
				}
				line := ref.String()
				if len(d.Workers) > 0 {
					var ws []string
					for _, w := range d.Workers {
						line := w.Name + "@" + strings.Join(w.IPs, ",")
						if w.Done {
							line += " done"
						}
						ws = append(ws, line)
					}
					line += fmt.Sprintf(" %v", ws)
				}
				if d.Version.Workers != edgeproto.WorkersDigest(d.Workers) {
					t.Errorf("%s: version %+v does not carry the digest of its workers", ref, d.Version)
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

// objects are what seededSets puts into the caches.
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

// seededSets are the Sets of the kinds the GlobalManager sends, not
// running, whose informers' caches hold objs.
func seededSets(t *testing.T, objs objects) *Sets {
	t.Helper()
	factory := sednainformers.NewSharedInformerFactory(sednafake.NewSimpleClientset(), 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	replicaSets, deployments := kubeFactory.Apps().V1().ReplicaSets().Informer(), kubeFactory.Apps().V1().Deployments().Informer()
	s := NewSets(KindsOf(kinds.All(), factory), kubeFactory.Core().V1().Pods().Informer())
	s.FollowReplicaSets(replicaSets.GetIndexer())
	s.FollowDeployments(deployments.GetIndexer())
	if err := s.AddIndexers(); err != nil {
		t.Fatal(err)
	}
	addAll(t, s, sednav1.DatasetKind.Kind, objs.datasets)
	addAll(t, s, sednav1.ModelKind.Kind, objs.models)
	addAll(t, s, sednav1.FederatedLearningJobKind.Kind, objs.federatedLearningJobs)
	addAll(t, s, sednav1.JointInferenceServiceKind.Kind, objs.jointInferenceServices)
	addAll(t, s, sednav1.IncrementalLearningJobKind.Kind, objs.incrementalJobs)
	addAll(t, s, sednav1.LifelongLearningJobKind.Kind, objs.lifelongJobs)
	for _, p := range objs.pods {
		if err := s.Pods().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range objs.replicaSets {
		if err := replicaSets.GetIndexer().Add(rs); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range objs.deployments {
		if err := deployments.GetIndexer().Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return s
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
	svc := edgehubtest.JointService("ji", "", "cloud")
	svc.UID = "uid-ji"
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "ji-edge", Namespace: edgehubtest.ObjectNamespace, UID: "uid-deploy",
		Labels: map[string]string{common.LabelOwnerUID: "uid-ji"}}}
	setController(deploy, "sedna.io/v1alpha1", "JointInferenceService", svc)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "ji-edge-abc", Namespace: edgehubtest.ObjectNamespace, UID: "uid-rs",
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
		p := withIPs(edgehubtest.WorkerPod(name, "uid-ji", node), corev1.PodRunning, "10.1.0.9")
		setController(p, "apps/v1", "ReplicaSet", owner)
		return p
	}
	s := seededSets(t, objects{
		jointInferenceServices: []*sednav1.JointInferenceService{svc},
		deployments:            []*appsv1.Deployment{deploy, userDeploy},
		replicaSets:            []*appsv1.ReplicaSet{rs, userRS, bareRS, staleRS},
		pods: []*corev1.Pod{
			pod("ji-edge-abc-1", "edge-0", rs),
			pod("mine-abc-1", "edge-1", userRS), pod("bare-1", "edge-1", bareRS), pod("stale-1", "edge-1", staleRS),
		},
	})
	ref := edgeproto.ObjectRef{Kind: sednav1.JointInferenceServiceKind.Kind, Namespace: edgehubtest.ObjectNamespace, Name: "ji"}
	d, ok := s.Of("edge-0")[ref]
	if want := []edgeproto.Worker{{Name: "ji-edge-abc-1", IPs: []string{"10.1.0.9"}}}; !ok || !cmp.Equal(d.Workers, want) {
		t.Errorf("edge-0, where the service's own pod runs: sent %v with workers %v, want %v", ok, d.Workers, want)
	}
	if _, ok := s.Of("edge-1")[ref]; ok {
		t.Errorf("edge-1, where only pods of other ReplicaSets carry the service's label, is sent the service")
	}
	k := s.Kind(sednav1.JointInferenceServiceKind.Kind)
	for _, worker := range []string{"mine-abc-1", "bare-1", "stale-1"} {
		if err := s.CheckWorker("edge-1", k, svc, worker, "10.1.0.9", time.Now()); err == nil {
			t.Errorf("a report of %s, a pod with the service's label that is not its worker, was taken", worker)
		}
	}
	if err := s.CheckWorker("edge-0", k, svc, "ji-edge-abc-1", "10.1.0.9", time.Now()); err != nil {
		t.Errorf("a report of the service's own pod, from its address: %v", err)
	}
	if err := s.CheckWorker("edge-0", k, svc, "ji-edge-abc-1", "10.1.0.10", time.Now()); err == nil {
		t.Errorf("a report of the service's own pod that the LocalController says came from another address was taken")
	}
	if err := s.CheckWorker("edge-0", k, svc, edgeproto.LocalControllerWorker, "", time.Now()); err == nil {
		t.Errorf("a report under the LocalController's own name was taken for a joint inference service")
	}
}

// A finished worker's report taken before it finished applies; one taken
// after, from its address, may be another pod's that got the address.
func TestAFinishedWorkersAddressCountsOnlyUntilItFinished(t *testing.T) {
	job := edgehubtest.FederatedJob("fl", "cloud", "edge-0")
	job.UID = "uid-fl"
	pod := withIPs(edgehubtest.WorkerPod("fl-train-0", "uid-fl", "edge-0"), corev1.PodSucceeded, "10.1.0.7")
	done := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(done)}}}}
	s := seededSets(t, objects{federatedLearningJobs: []*sednav1.FederatedLearningJob{job}, pods: []*corev1.Pod{pod}})
	k := s.Kind(sednav1.FederatedLearningJobKind.Kind)
	if err := s.CheckWorker("edge-0", k, job, "fl-train-0", "10.1.0.7", done.Add(-time.Second)); err != nil {
		t.Errorf("its last report, taken before it finished: %v", err)
	}
	if err := s.CheckWorker("edge-0", k, job, "fl-train-0", "10.1.0.7", done.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "after the pod finished") {
		t.Errorf("a report taken a minute after it finished: %v, want refused", err)
	}
}

func TestAPodInAnotherNamespaceDoesNotHideAnOwnersPods(t *testing.T) {
	job := edgehubtest.FederatedJob("fl-sched", "cloud", "")
	job.UID = "uid-fl-sched"
	// Pods elsewhere on the node that name the job's UID, as anyone who may
	// create pods in another namespace can make them.
	var forged []*corev1.Pod
	for _, ns := range []string{"other-1", "other-2", "other-3"} {
		p := edgehubtest.WorkerPod("forged", "uid-fl-sched", "edge-d")
		p.Namespace = ns
		forged = append(forged, p)
	}
	s := seededSets(t, objects{
		pods:                  append(forged, edgehubtest.WorkerPod("fl-sched-train-0", "uid-fl-sched", "edge-d")),
		federatedLearningJobs: []*sednav1.FederatedLearningJob{job},
	})
	want := edgeproto.ObjectRef{Kind: sednav1.FederatedLearningJobKind.Kind, Namespace: edgehubtest.ObjectNamespace, Name: "fl-sched"}
	// The pods on a node come from a set, in no fixed order: look often
	// enough that the forged ones come first in some of the tries.
	for range 20 {
		if _, ok := s.Of("edge-d")[want]; !ok {
			t.Fatalf("edge-d's set lacks %s, whose pod runs there", want)
		}
	}
}

func TestAnEventOnAJobReachesTheNodesItsPodsAreBoundTo(t *testing.T) {
	job := edgehubtest.FederatedJob("fl-sched", "cloud", "") // a training worker the scheduler placed
	job.UID = "uid-fl-sched"
	elsewhere := edgehubtest.WorkerPod("forged", "uid-fl-sched", "edge-x")
	elsewhere.Namespace = "other"
	s := seededSets(t, objects{
		pods:                  []*corev1.Pod{edgehubtest.WorkerPod("fl-sched-train-0", "uid-fl-sched", "edge-d"), edgehubtest.WorkerPod("unbound", "uid-fl-sched", ""), elsewhere},
		federatedLearningJobs: []*sednav1.FederatedLearningJob{job},
	})
	got := s.AffectedNodes(s.Kind(sednav1.FederatedLearningJobKind.Kind), job)
	slices.Sort(got)
	if want := []string{"cloud", "edge-d"}; !slices.Equal(got, want) {
		t.Errorf("affectedNodes = %q, want %q: its template's node and where its pod is bound, not a pod elsewhere naming its UID", got, want)
	}
}

// addAll puts objs into the cache of kind's informer.
func addAll[T any](t *testing.T, s *Sets, kind string, objs []T) {
	t.Helper()
	for _, o := range objs {
		if err := s.Kind(kind).Informer.GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
}
