package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/test/framework"
)

// testDIJobV1ServerPlacesDDPLearnersOnFreeGPUs: a coordinator asks for a
// learner of 4 GPUs where two nodes have 2 free each; it gets an aggregator
// (from the AggregatorConfig) and two DDP learners, one per node, with
// DI-orchestrator's DDP environment, and GET ?aggregator= lists them; a
// learner asked for next, with no GPU left, is refused saying why.
func testDIJobV1ServerPlacesDDPLearnersOnFreeGPUs(t *testing.T) {
	ns := framework.Namespace(t)
	s := startV1Server(t, ns, "--di-aggregator-config", ns+"/agconfig")
	pool := "ddp-" + ns[len(ns)-5:]
	selector, tolerations := allocPoolOf(t, pool, nil, corev1.ResourceList{coordinated.ResourceGPU: resource.MustParse("2")}, pool+"-a", pool+"-b")
	createAggregatorConfig(t, ns, "agconfig")

	learner := map[string]any{"spec": map[string]any{
		"nodeSelector": selector,
		"tolerations":  []any{map[string]any{"key": tolerations[0].Key, "operator": "Equal", "value": tolerations[0].Value, "effect": "NoSchedule"}},
		"containers":   []any{map[string]any{"name": coordinated.ContainerName, "image": "busybox"}},
	}}
	coordinator := startV1JobsCoordinator(t, ns, "ddp", map[string]map[string]any{coordinated.Learner: learner})
	from := coordinator.Status.PodIP
	s.waitForReplicas(from, coordinator.Name, nil, nil)

	ask := func(gpus int) (int, diResponse) {
		return s.call(from, http.MethodPost, "/v1alpha1/replicas", fmt.Sprintf(
			`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 0}, "learners": {"replicas": 1, "gpus": "%d", "cpus": "1"}}`, ns, coordinator.Name, gpus))
	}
	code, r := ask(4)
	var created v1JobAnswer
	if code != http.StatusOK || json.Unmarshal(r.Data, &created) != nil || len(created.Learners) != 1 {
		t.Fatalf("POST a learner of 4 GPUs: %d %+v, want the aggregator's URL", code, r)
	}
	aggregator := strings.SplitN(created.Learners[0], ".", 2)[0]
	if want := coordinated.URL(aggregator, ns, coordinated.AggregatorPort); created.Learners[0] != want {
		t.Errorf("the learner answered %s, want the aggregator at %s", created.Learners[0], want)
	}
	ddp := checkDDPLearners(t, ns, aggregator, pool)

	// The aggregator asks for its DDP learners, from its own address.
	var agPod *corev1.Pod
	framework.Eventually(t, 60*time.Second, "aggregator "+aggregator+" to run with an address", func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, aggregator, metav1.GetOptions{})
		agPod = p
		return err == nil && p.Status.PodIP != "", err
	})
	// The server knows the aggregator's address, and lists every learner,
	// once the GlobalManager's pod cache has seen them, a moment after the
	// API server has.
	var listed v1JobAnswer
	framework.Eventually(t, 30*time.Second, "the v1 server to take aggregator "+aggregator+"'s address and list its learners", func(context.Context) (bool, error) {
		code, r = s.call(agPod.Status.PodIP, http.MethodGet, fmt.Sprintf("/v1alpha1/replicas?namespace=%s&aggregator=%s", ns, aggregator), "")
		listed = v1JobAnswer{}
		if code != http.StatusOK || json.Unmarshal(r.Data, &listed) != nil {
			return false, nil
		}
		for _, p := range ddp {
			if !slices.Contains(listed.Learners, coordinated.AccessURL(p)) {
				return false, nil
			}
		}
		return true, nil
	})
	// Every DDP learner is listed (the wait above); nothing else is.
	if len(listed.Learners) != 4 {
		t.Errorf("GET ?aggregator=%s: %d %+v, want each DDP learner at di-port and at its one gpu-port", aggregator, code, r)
	}

	if code, r := ask(2); code != http.StatusConflict || !strings.Contains(r.Message, "2 GPUs for a learner cannot be placed") {
		t.Errorf("POST a learner of 2 GPUs with none free: %d %+v, want 409 saying why", code, r)
	}
}

// createAggregatorConfig makes the AggregatorConfig aggregators are built
// from.
func createAggregatorConfig(t *testing.T, ns, name string) {
	t.Helper()
	ag := &div1.AggregatorConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: div1.AggregatorConfigSpec{Aggregator: div1.AggregatorSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: coordinated.ContainerName, Image: "busybox"}},
		}}}},
	}
	if _, err := framework.SednaClient(t).DiengineV1alpha1().AggregatorConfigs(ns).Create(t.Context(), ag, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkDDPLearners checks aggregator's DDP learners: two, one on each node
// of pool, of 2 GPUs each, with the DDP environment of a world of 4, the
// first the master; it returns them master first.
func checkDDPLearners(t *testing.T, ns, aggregator, pool string) []*corev1.Pod {
	t.Helper()
	list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: coordinated.LabelReplicaType + "=" + coordinated.DDPLearner})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if coordinated.OwnedByAggregator(&list.Items[i], aggregator) {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) != 2 {
		t.Fatalf("aggregator %s has %d DDP learners, want 2 (2 GPUs on each of 2 nodes)", aggregator, len(pods))
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return strings.Compare(envOf(a)[coordinated.EnvStartRank], envOf(b)[coordinated.EnvStartRank])
	})
	nodes := map[string]bool{}
	for i, p := range pods {
		env := envOf(p)
		master := "localhost"
		if i > 0 {
			master = pods[0].Name
		}
		want := map[string]string{
			coordinated.EnvWorldSize: "4", coordinated.EnvLocalWorldSize: "2", coordinated.EnvStartRank: fmt.Sprint(2 * i),
			coordinated.EnvMasterAddr: master, coordinated.EnvMasterPort: fmt.Sprint(coordinated.MasterPort),
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("DDP learner %s: %s=%q, want %q", p.Name, k, env[k], v)
			}
		}
		if gpus := p.Spec.Containers[0].Resources.Limits[coordinated.ResourceGPU]; gpus.Cmp(resource.MustParse("2")) != 0 {
			t.Errorf("DDP learner %s has %s GPUs, want 2", p.Name, gpus.String())
		}
		nodes[common.PinnedNode(p)] = true
	}
	if !nodes[pool+"-a"] || !nodes[pool+"-b"] {
		t.Errorf("DDP learners pinned to %v, want one on each of %s-a and %s-b", nodes, pool, pool)
	}
	return pods
}

func envOf(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}
