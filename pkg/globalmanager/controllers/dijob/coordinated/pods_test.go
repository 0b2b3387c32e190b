package coordinated

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// testJob is a v1 job with a volume and a priority class.
func testJob() *div1.DIJob {
	return &div1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cartpole", Namespace: "rl", UID: "job-uid"},
		Spec: div1.DIJobSpec{
			PriorityClassName: "high",
			Volumes:           []corev1.Volume{{Name: "work-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// template is a template of a di-container and a sidecar, the di-container
// with port (none when 0) and an env the replica's own overrides.
func template(port int32) *corev1.PodTemplateSpec {
	c := corev1.Container{Name: ContainerName, Image: "ding", Env: []corev1.EnvVar{{Name: EnvPodName, Value: "stale"}, {Name: "PYTHONUNBUFFERED", Value: "1"}}}
	if port != 0 {
		c.Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: port}}
	}
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ding"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c, {Name: "sidecar", Image: "s"}}},
	}
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// TestPodCarriesWhatDIEngineReads: each replica type's pod has
// DI-orchestrator v0.2's name, labels, owner, port and environment.
func TestPodCarriesWhatDIEngineReads(t *testing.T) {
	for name, tc := range map[string]struct {
		typ, pod  string
		port      int32 // the template's; 0 for none
		wantPort  int32
		serverURL string
		wantEnv   map[string]string
	}{
		"a coordinator, its default port": {typ: Coordinator, pod: "cartpole-coordinator", wantPort: 22273, serverURL: "http://server:8080",
			wantEnv: map[string]string{"COORDINATOR_PORT": "22273", EnvCoordinatorURL: "cartpole-coordinator.rl:22273", EnvServerURL: "http://server:8080"}},
		"a collector, the template's port": {typ: Collector, pod: "cartpole-collector-abcde", port: 22270, wantPort: 22270,
			wantEnv: map[string]string{"COLLECTOR_PORT": "22270"}},
		"a learner": {typ: Learner, pod: "cartpole-learner-abcde", wantPort: 22271, wantEnv: map[string]string{"LEARNER_PORT": "22271"}},
		"an aggregator": {typ: Aggregator, pod: "cartpole-aggregator-abcde", wantPort: 22272, serverURL: "http://server:8080",
			wantEnv: map[string]string{"AGGREGATOR_PORT": "22272", EnvServerURL: "http://server:8080"}},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := template(tc.port)
			before := tmpl.DeepCopy()
			pod, port := Pod(Replica{Job: testJob(), Type: tc.typ, Name: tc.pod, Template: tmpl, ServerURL: tc.serverURL})
			if !cmp.Equal(before, tmpl) {
				t.Error("Pod changed the template")
			}
			if got, ok := PortOf(pod); port != tc.wantPort || !ok || got != tc.wantPort {
				t.Errorf("port %d, di-port %d (%v); want %d", port, got, ok, tc.wantPort)
			}
			want := map[string]string{LabelJobName: "cartpole", LabelReplicaType: tc.typ, LabelGroupName: GroupName, LabelControllerName: ControllerName,
				LabelPodName: tc.pod, "app": "ding", common.LabelOwnerUID: "job-uid"}
			for k, v := range want {
				if pod.Labels[k] != v {
					t.Errorf("label %s=%q, want %q", k, pod.Labels[k], v)
				}
			}
			if pod.Name != tc.pod || pod.Namespace != "rl" || metav1.GetControllerOf(pod) == nil || metav1.GetControllerOf(pod).UID != "job-uid" {
				t.Errorf("pod %s/%s controlled by %v", pod.Namespace, pod.Name, metav1.GetControllerOf(pod))
			}
			wantEnv := map[string]string{EnvPodNamespace: "rl", EnvPodName: tc.pod, "PYTHONUNBUFFERED": "1"}
			for k, v := range tc.wantEnv {
				wantEnv[k] = v
			}
			for _, c := range pod.Spec.Containers {
				for k, v := range wantEnv {
					if k == "PYTHONUNBUFFERED" && c.Name != ContainerName {
						continue
					}
					if got := envOf(c)[k]; got != v {
						t.Errorf("%s: %s=%q, want %q", c.Name, k, got, v)
					}
				}
				if _, ok := envOf(c)[EnvServerURL]; ok != (tc.serverURL != "") {
					t.Errorf("%s: %s set %v, want %v", c.Name, EnvServerURL, ok, tc.serverURL != "")
				}
			}
			if pod.Spec.PriorityClassName != "high" || !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "work-dir" }) {
				t.Errorf("priorityClassName %q, volumes %v; want the job's", pod.Spec.PriorityClassName, pod.Spec.Volumes)
			}
			if wantNever := tc.typ == Coordinator; (pod.Spec.RestartPolicy == corev1.RestartPolicyNever) != wantNever {
				t.Errorf("restartPolicy %q", pod.Spec.RestartPolicy)
			}
		})
	}
}

// TestServiceSelectsItsPodByName: a pod's Service is headless, of the
// pod's name and owner, selects that pod alone, publishes it before it is
// ready, and carries its di-port and a DDP learner's GPU and master ports.
func TestServiceSelectsItsPodByName(t *testing.T) {
	pod, _ := Pod(Replica{Job: testJob(), Type: DDPLearner, Name: "cartpole-ddp-learner-abcde", Template: template(0)})
	AddPort(pod, corev1.ContainerPort{Name: DDPPortPrefix + "-1", ContainerPort: 22272})
	AddPort(pod, corev1.ContainerPort{Name: MasterPortName, ContainerPort: MasterPort})
	svc := Service(pod)
	if svc.Name != pod.Name || svc.Namespace != "rl" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s/%s clusterIP %q publishNotReady %v", svc.Namespace, svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	wantSelector := map[string]string{LabelGroupName: GroupName, LabelJobName: "cartpole", LabelControllerName: ControllerName, LabelReplicaType: DDPLearner, LabelPodName: pod.Name}
	if diff := cmp.Diff(wantSelector, svc.Spec.Selector); diff != "" {
		t.Errorf("selector (-want,+got):\n%s", diff)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+":"+strconv.Itoa(int(p.Port)))
	}
	if want := []string{"di-port:22271", "gpu-port-1:22272", "master-port:10314"}; !slices.Equal(ports, want) {
		t.Errorf("ports %v, want %v", ports, want)
	}
	if svc.Labels[common.LabelOwnerUID] != "job-uid" || metav1.GetControllerOf(svc) == nil || metav1.GetControllerOf(svc).UID != "job-uid" {
		t.Errorf("Service labels %v, controller %v; want the job's", svc.Labels, metav1.GetControllerOf(svc))
	}
}

// TestRebuildIsTheSameReplicaUnderANewName: a failed pod's replacement is
// its template's pod on no node, with the old one's resources, a new name
// of its prefix that pod-name and KUBERNETES_POD_NAME follow, and the job
// as its controller.
func TestRebuildIsTheSameReplicaUnderANewName(t *testing.T) {
	r := Replica{Job: testJob(), Type: Collector, Name: "cartpole-collector-abcde", Template: template(0)}
	old, _ := Pod(r)
	SetResources(old, Resources{CPU: resource.MustParse("2")})
	old.Spec.NodeName = "node-1"
	old.Status.Phase = corev1.PodFailed
	before := old.DeepCopy()
	pod := Rebuild(old, Replica{Job: testJob(), Template: template(0)}, time.Minute)
	if !cmp.Equal(before, old) {
		t.Error("Rebuild changed the old pod")
	}
	if pod.Name == old.Name || !strings.HasPrefix(pod.Name, "cartpole-collector-") || len(pod.Name) != len(old.Name) {
		t.Errorf("new name %q, want cartpole-collector- and %d new characters", pod.Name, randomLength)
	}
	if pod.Labels[LabelPodName] != pod.Name || pod.Labels[LabelReplicaType] != Collector {
		t.Errorf("labels %v", pod.Labels)
	}
	for _, c := range pod.Spec.Containers {
		if envOf(c)[EnvPodName] != pod.Name {
			t.Errorf("%s: %s=%q, want %q", c.Name, EnvPodName, envOf(c)[EnvPodName], pod.Name)
		}
	}
	if cpu := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("di-container's CPU limit %s, want the old one's 2", cpu.String())
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != "" || !cmp.Equal(pod.OwnerReferences, old.OwnerReferences) {
		t.Errorf("nodeName %q phase %q owners %v", pod.Spec.NodeName, pod.Status.Phase, pod.OwnerReferences)
	}
}

// TestRebuildTakesNothingElseFromTheOldPod: anyone who may create pods can
// make one passing for a replica, and anyone who may update pods can
// change a failed one's images, tolerations and owners; the replacement,
// made by the GlobalManager, is the template's pod, but for a DDP
// learner's resources, ports, rank variables, role, node affinity and
// aggregator owner.
func TestRebuildTakesNothingElseFromTheOldPod(t *testing.T) {
	slot := GPUSlot{Node: "gpu-0", GPUs: 2}
	aggregator := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cartpole-aggregator-fghij", Namespace: "rl", UID: "aggregator-uid"}}
	r := Replica{Job: testJob(), Template: template(0)}
	learners, err := DDPLearners(r, aggregator, Resources{CPU: resource.MustParse("4")}, []GPUSlot{slot})
	if err != nil {
		t.Fatal(err)
	}
	made := learners[0]
	old := made.DeepCopy()
	// What was done to the old pod since.
	old.OwnerReferences = append(old.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"})
	old.Spec.Containers[0].Image, old.Spec.Containers[1].Image = "attacker", "attacker"
	old.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
	old.Spec.HostNetwork, old.Spec.ServiceAccountName = true, "admin"
	old.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(bool)}
	old.Spec.Volumes = append(old.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	old.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "attacker"}}}

	pod := Rebuild(old, r, time.Minute)
	want := made.DeepCopy()
	want.Name, want.Labels[LabelPodName] = pod.Name, pod.Name
	SetEnv(want, common.Env(EnvPodName, pod.Name))
	if diff := cmp.Diff(want, pod); diff != "" {
		t.Errorf("replacement (-want,+got):\n%s", diff)
	}
}

// TestPlaceKeepsAllButEdgeCollectorsOffTheEdge: a collector whose template
// selects edge nodes is left there and tolerates a link outage; every other
// replica, a collector that selects nothing included, gets a required
// affinity off edge nodes, in each of its template's terms.
func TestPlaceKeepsAllButEdgeCollectorsOffTheEdge(t *testing.T) {
	offEdge := corev1.NodeSelectorRequirement{Key: allocator.EdgeNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	grace := 30 * time.Second
	for name, tc := range map[string]struct {
		typ       string
		terms     []corev1.NodeSelectorTerm
		selector  map[string]string
		wantTerms int // terms that must keep off the edge; 0: on the edge
	}{
		"a coordinator":                  {typ: Coordinator, wantTerms: 1},
		"a learner with two terms":       {typ: Learner, terms: []corev1.NodeSelectorTerm{{}, {}}, wantTerms: 2},
		"a DDP learner":                  {typ: DDPLearner, wantTerms: 1},
		"an aggregator":                  {typ: Aggregator, wantTerms: 1},
		"a collector, anywhere":          {typ: Collector, wantTerms: 1},
		"a collector on the edge":        {typ: Collector, terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: allocator.EdgeNodeLabel, Operator: corev1.NodeSelectorOpExists}}}}, wantTerms: 0},
		"a collector selecting the edge": {typ: Collector, selector: map[string]string{allocator.EdgeNodeLabel: ""}, wantTerms: 0},
		"a learner selecting the edge":   {typ: Learner, selector: map[string]string{allocator.EdgeNodeLabel: ""}, wantTerms: 1},
	} {
		t.Run(name, func(t *testing.T) {
			pod, _ := Pod(Replica{Job: testJob(), Type: tc.typ, Name: "p", Template: template(0)})
			if tc.terms != nil {
				pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: tc.terms}}}
			}
			pod.Spec.NodeSelector = tc.selector
			Place(pod, grace)
			var terms []corev1.NodeSelectorTerm
			if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			off := 0
			for _, term := range terms {
				if slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool { return cmp.Equal(r, offEdge) }) {
					off++
				}
			}
			if off != tc.wantTerms || (tc.wantTerms > 0 && off != len(terms)) {
				t.Errorf("%d of %d terms keep off the edge, want %d", off, len(terms), tc.wantTerms)
			}
			if edge := tc.wantTerms == 0; edge == (len(pod.Spec.Tolerations) == 0) {
				t.Errorf("on the edge: %t; tolerations %v", edge, pod.Spec.Tolerations)
			}
		})
	}
}
