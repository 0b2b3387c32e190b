package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
	"github.com/nereid-ml/nereid/test/framework"
)

// v1Server is the v1 replicas server of a GlobalManager, spoken to as a pod
// of the job would: from the pod's address (kwok's, on the loopback).
type v1Server struct {
	t    *testing.T
	base string
	ns   string
}

// v1JobAnswer is DI's DIJobResponse.
type v1JobAnswer struct {
	Namespace   string   `json:"namespace"`
	Coordinator string   `json:"coordinator"`
	Collectors  []string `json:"collectors"`
	Learners    []string `json:"learners"`
}

// call sends one request from the address from and returns the status
// and DI's response.
func (s v1Server) call(from, method, path, body string) (int, diResponse) {
	s.t.Helper()
	client := playworker.ClientFrom(from)
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r diResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		s.t.Fatalf("%s %s: %d, not DI's response: %v\n%s", method, path, resp.StatusCode, err, raw)
	}
	return resp.StatusCode, r
}

// change sends a change from the coordinator and returns its data.
func (s v1Server) change(from, method, path, body string) v1JobAnswer {
	s.t.Helper()
	code, r := s.call(from, method, path, body)
	var data v1JobAnswer
	if code != http.StatusOK || json.Unmarshal(r.Data, &data) != nil {
		s.t.Fatalf("%s %s %s: %d %+v", method, path, body, code, r)
	}
	return data
}

// waitForReplicas waits for GET to list exactly collectors and learners.
func (s v1Server) waitForReplicas(from, coordinator string, collectors, learners []string) {
	s.t.Helper()
	path := fmt.Sprintf("/v1alpha1/replicas?namespace=%s&coordinator=%s", s.ns, coordinator)
	var got v1JobAnswer
	framework.Eventually(s.t, 60*time.Second, fmt.Sprintf("GET to list collectors %v and learners %v", collectors, learners), func(context.Context) (bool, error) {
		code, r := s.call(from, http.MethodGet, path, "")
		if code != http.StatusOK || json.Unmarshal(r.Data, &got) != nil {
			s.t.Logf("GET: %d %+v", code, r)
			return false, nil
		}
		return sameSet(got.Collectors, collectors) && sameSet(got.Learners, learners), nil
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// v1ServerAddress is where a GlobalManager serves the v1 replicas server,
// as its log says.
// startV1Server starts a GlobalManager of ns serving the v1 replicas
// server (KUBERNETES_SERVER_URL 127.0.0.1:8080), with extra flags, and
// the DIJob CRD's conversion webhook; it returns the server to call.
func startV1Server(t *testing.T, ns string, extra ...string) v1Server {
	t.Helper()
	gm := framework.StartGlobalManager(t, ns, append([]string{"--edge-namespace", ns, framework.DIJobConversion,
		"--di-v1-server-address", "127.0.0.1:0", "--di-v1-server-url", "127.0.0.1:8080"}, extra...)...)
	waitForTheConversionWebhook(t, ns)
	return v1Server{t: t, base: v1ServerAddress(t, gm), ns: ns}
}

func v1ServerAddress(t *testing.T, gm *framework.Process) string {
	t.Helper()
	var addr string
	framework.Eventually(t, 30*time.Second, "the v1 replicas server to listen", func(context.Context) (bool, error) {
		addr = gm.V1ServerAddress()
		return addr != "", nil
	})
	return "http://" + addr
}

// testDIJobV1ServerScalesTheJobOfTheCoordinatorThatAsks plays DI-engine's
// v1 coordinator: from its pod's address, without a token, it asks for
// collectors and learners, lists them, reports one failed and has it
// replaced, and removes them; a request from another address is refused
// and changes nothing.
func testDIJobV1ServerScalesTheJobOfTheCoordinatorThatAsks(t *testing.T) {
	ns := framework.Namespace(t)
	s := startV1Server(t, ns)
	coordinator := startV1JobsCoordinator(t, ns, "pong", nil)
	from := coordinator.Status.PodIP

	body := fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 2, "cpus": "100m"}, "learners": {"replicas": 1, "memory": 134217728, "gpus": 0}}`, ns, coordinator.Name)
	if code, r := s.call("127.0.0.1", http.MethodPost, "/v1alpha1/replicas", body); code != http.StatusUnauthorized {
		t.Errorf("POST from another address without a token: %d %+v, want 401", code, r)
	}
	// The server knows the coordinator once its cache has the pod's
	// address: DI-engine's coordinator retries until then.
	s.waitForReplicas(from, coordinator.Name, nil, nil)
	checkV1ServerTokens(t, s, coordinator.Name)
	created := s.change(from, http.MethodPost, "/v1alpha1/replicas", body)
	if len(created.Collectors) != 2 || len(created.Learners) != 1 {
		t.Fatalf("POST answered %+v, want 2 collectors and 1 learner", created)
	}
	s.waitForReplicas(from, coordinator.Name, created.Collectors, created.Learners)
	checkV1ReplicaPods(t, ns, created)

	failed := strings.SplitN(created.Collectors[0], ".", 2)[0]
	replaced := s.change(from, http.MethodPost, "/v1alpha1/replicas/failed",
		fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": [%q]}`, ns, coordinator.Name, failed))
	if len(replaced.Collectors) != 1 || replaced.Collectors[0] == created.Collectors[0] {
		t.Fatalf("replicas/failed answered %+v, want a new collector in place of %s", replaced, failed)
	}
	collectors := []string{created.Collectors[1], replaced.Collectors[0]}
	s.waitForReplicas(from, coordinator.Name, collectors, created.Learners)

	removed := s.change(from, http.MethodDelete, "/v1alpha1/replicas",
		fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 5}, "learners": {"replicas": 1}}`, ns, coordinator.Name))
	if !sameSet(removed.Collectors, collectors) || !sameSet(removed.Learners, created.Learners) {
		t.Errorf("DELETE answered %+v, want collectors %v and learners %v", removed, collectors, created.Learners)
	}
	s.waitForReplicas(from, coordinator.Name, nil, nil)
}

// startV1JobsCoordinator applies a v1alpha1 DIJob whose templates are
// those of templates, by replica type (coordinated.Collector,
// coordinated.Learner), and a busybox di-container for the others, and
// waits for its coordinator pod, the v1 operator's, to run with an address.
func startV1JobsCoordinator(t *testing.T, ns, name string, templates map[string]map[string]any) *corev1.Pod {
	t.Helper()
	tmpl := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": coordinated.ContainerName, "image": "busybox"}}}}
	spec := map[string]any{}
	for _, typ := range []string{coordinated.Coordinator, coordinated.Collector, coordinated.Learner} {
		spec[typ] = map[string]any{"template": tmpl}
		if own, ok := templates[typ]; ok {
			spec[typ] = map[string]any{"template": own}
		}
	}
	manifest := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": div1.SchemeGroupVersion.String(), "kind": "DIJob",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	v1dijobs := div1.SchemeGroupVersion.WithResource("dijobs")
	// The API server takes the webhook's clientConfig within moments.
	framework.Eventually(t, 30*time.Second, "the v1alpha1 DIJob created", func(ctx context.Context) (bool, error) {
		_, err := dynamicClient(t).Resource(v1dijobs).Namespace(ns).Create(ctx, manifest, metav1.CreateOptions{})
		if err != nil {
			t.Logf("creating the v1alpha1 DIJob: %v", err)
		}
		return err == nil, nil
	})
	var pod *corev1.Pod
	name = coordinated.CoordinatorName(name)
	framework.Eventually(t, 60*time.Second, "coordinator "+name+" to run with an address", func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		pod = p
		return err == nil && p.Status.PodIP != "", nil
	})
	return pod
}

// checkV1ReplicaPods checks the pods behind the URLs answered: the job's,
// of their type, with the resources asked for and the server's URL.
func checkV1ReplicaPods(t *testing.T, ns string, created v1JobAnswer) {
	t.Helper()
	kube := framework.KubeClient(t)
	for typ, urls := range map[string][]string{coordinated.Collector: created.Collectors, coordinated.Learner: created.Learners} {
		for _, u := range urls {
			name := strings.SplitN(u, ".", 2)[0]
			pod, err := kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := pod.Spec.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if coordinated.TypeOf(pod) != typ || env[coordinated.EnvServerURL] != "127.0.0.1:8080" || metav1.GetControllerOf(pod) == nil {
				t.Errorf("pod %s: type %s, KUBERNETES_SERVER_URL %q, controller %v; want a %s of the job with the server's URL",
					name, coordinated.TypeOf(pod), env[coordinated.EnvServerURL], metav1.GetControllerOf(pod), typ)
			}
			if typ == coordinated.Collector && c.Resources.Requests.Cpu().Cmp(resource.MustParse("100m")) != 0 {
				t.Errorf("collector %s requests %v, want cpu 100m", name, c.Resources.Requests)
			}
			if typ == coordinated.Learner && c.Resources.Limits.Memory().Cmp(resource.MustParse("128Mi")) != 0 {
				t.Errorf("learner %s limits %v, want memory 128Mi", name, c.Resources.Limits)
			}
		}
	}
}

// checkV1ServerTokens: from any address, a token that may update the job
// is let in, one that may not is refused with the reason.
func checkV1ServerTokens(t *testing.T, s v1Server, coordinator string) {
	t.Helper()
	editor := serviceAccountToken(t, s.ns, "editor", []rbacv1.PolicyRule{{
		APIGroups: []string{div2.GroupName}, Resources: []string{"dijobs"}, Verbs: []string{"get", "update"},
	}})
	viewer := serviceAccountToken(t, s.ns, "viewer", nil)
	body := fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 0}, "learners": {"replicas": 0}}`, s.ns, coordinator)
	if code, r := s.callWithToken(viewer, http.MethodPost, "/v1alpha1/replicas", body); code != http.StatusForbidden || !strings.Contains(r.Message, "may not update dijobs") {
		t.Errorf("POST with a token that may not update the job: %d %+v, want 403 with the reason", code, r)
	}
	if code, r := s.callWithToken(editor, http.MethodPost, "/v1alpha1/replicas", body); code != http.StatusOK {
		t.Errorf("POST with a token that may update the job: %d %+v, want 200", code, r)
	}
}

// callWithToken sends one request with a bearer token, from 127.0.0.1.
func (s v1Server) callWithToken(token, method, path, body string) (int, diResponse) {
	s.t.Helper()
	return callReplicasAPI(s.t, method, s.base+path, token, body)
}
