package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/test/framework"
)

// replicasAPIAddress is where a GlobalManager serves the DIJob replicas API,
// as its log says.
func replicasAPIAddress(t *testing.T, gm *framework.Process) string {
	t.Helper()
	var addr string
	framework.Eventually(t, 30*time.Second, "the replicas API to listen", func(context.Context) (bool, error) {
		for _, line := range strings.Split(gm.Log(), "\n") {
			if _, after, ok := strings.Cut(line, `"Serving the DIJob replicas API" address="`); ok {
				addr, _, _ = strings.Cut(after, `"`)
			}
		}
		return addr != "", nil
	})
	return "http://" + addr
}

// serviceAccountToken makes a ServiceAccount in ns, binds it to rules when
// given, and returns a token of it.
func serviceAccountToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	kube := framework.KubeClient(t)
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rules != nil {
		if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

type diResponse struct {
	Success bool            `json:"success"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// callReplicasAPI sends one request and returns the HTTP status and the body.
func callReplicasAPI(t *testing.T, method, url, token, body string) (int, diResponse) {
	t.Helper()
	return callReplicasAPIWith(t, http.DefaultClient, method, url, token, body)
}

// callReplicasAPIWith is callReplicasAPI through client.
func callReplicasAPIWith(t *testing.T, client *http.Client, method, url, token, body string) (int, diResponse) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r diResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: %d, not DI's response shape: %v\n%s", method, url, resp.StatusCode, err, raw)
	}
	return resp.StatusCode, r
}

func TestDIJobReplicasAPIChangesThePodsForWhoMayEditTheJob(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns, "--di-server-address", "127.0.0.1:0")
	base := replicasAPIAddress(t, gm)
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	url := fmt.Sprintf("%s/v2alpha1/job/%s.%s/replicas", base, ns, diExample)

	editor := serviceAccountToken(t, ns, "editor", []rbacv1.PolicyRule{{
		APIGroups: []string{div2.GroupName}, Resources: []string{"dijobs"}, Verbs: []string{"get", "update"},
	}})
	viewer := serviceAccountToken(t, ns, "viewer", nil)

	if code, r := callReplicasAPI(t, http.MethodPost, url, "", `{"replicas": 1}`); code != http.StatusUnauthorized || r.Success {
		t.Errorf("no token: %d %+v, want 401", code, r)
	}
	if code, r := callReplicasAPI(t, http.MethodPost, url, "not-a-token", `{"replicas": 1}`); code != http.StatusUnauthorized {
		t.Errorf("a bad token: %d %+v, want 401", code, r)
	}
	if code, r := callReplicasAPI(t, http.MethodPost, url, viewer, `{"replicas": 1}`); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount that may not edit the job: %d %+v, want 403", code, r)
	}

	// POST adds collectors (the default task); the pod appears.
	if code, r := callReplicasAPI(t, http.MethodPost, url, editor, `{"replicas": 2}`); code != http.StatusOK || !r.Success {
		t.Fatalf("POST 2 replicas: %d %+v", code, r)
	}
	framework.Eventually(t, 60*time.Second, "collectors 2 and 3 running", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, job)
		return err == nil && len(pods) == 6 && pods["cartpole-dqn-collector-3"] != nil && pods["cartpole-dqn-collector-3"].Status.PodIP != "", err
	})
	waitForDIJob(t, ns, diExample, "Running with 6 replicas", func(j *div2.DIJob) bool {
		return j.Status.Phase == div2.JobRunning && j.Status.Replicas == 6
	})
	// GET lists every replica, ip:port, in rank order.
	code, r := callReplicasAPI(t, http.MethodGet, url, editor, "")
	var got []string
	if code != http.StatusOK || json.Unmarshal(r.Data, &got) != nil {
		t.Fatalf("GET replicas: %d %+v", code, r)
	}
	pods, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	// Ranks stay put: the collectors added come after the evaluator.
	for _, n := range []string{"learner-0", "collector-0", "collector-1", "evaluator-0", "collector-2", "collector-3"} {
		want = append(want, pods["cartpole-dqn-"+n].Status.PodIP+":22270")
	}
	if !slices.Equal(got, want) {
		t.Errorf("GET replicas = %v, want in rank order %v", got, want)
	}

	// DELETE removes from the learner when named; a task keeps one.
	if code, r := callReplicasAPI(t, http.MethodDelete, url, editor, `{"replicas": 3}`); code != http.StatusOK {
		t.Fatalf("DELETE 3 collectors: %d %+v", code, r)
	}
	framework.Eventually(t, 60*time.Second, "collectors 1, 2 and 3 gone", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, job)
		return err == nil && slices.Equal(keys(pods), []string{"cartpole-dqn-collector-0", "cartpole-dqn-evaluator-0", "cartpole-dqn-learner-0"}), err
	})
	if code, r := callReplicasAPI(t, http.MethodDelete, url, editor, `{"replicas": 1, "task": "learner"}`); code != http.StatusConflict || r.Success {
		t.Errorf("removing the last learner: %d %+v, want 409", code, r)
	}
	if code, _ := callReplicasAPI(t, http.MethodGet, fmt.Sprintf("%s/v2alpha1/job/%s.nope/replicas", base, ns), editor, ""); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Errorf("an unknown job: %d, want 404 (or 403: the editor may not read it)", code)
	}

	// Profilings are stored in status.
	prof := fmt.Sprintf("%s/v2alpha1/job/%s.%s/profilings", base, ns, diExample)
	if code, r := callReplicasAPI(t, http.MethodPost, prof, editor, `{"data": {"fps": 1200}}`); code != http.StatusOK {
		t.Fatalf("POST profilings: %d %+v", code, r)
	}
	framework.Eventually(t, 30*time.Second, "the profilings in status", func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Get(ctx, diExample, metav1.GetOptions{})
		return err == nil && j.Status.Profilings != nil && strings.Contains(string(j.Status.Profilings.Raw), "1200"), err
	})
}

// As the chart serves it: HTTPS with a certificate the GlobalManager made
// itself, and tokens of the API's own audience. Every pod of a DIJob gets
// the CA and a token of that audience bound to it; with them a replica is
// let in over TLS it verifies. A token for the API server, plain HTTP and a
// client that does not trust the CA get nothing.
func TestDIJobReplicasAPIServesTLSToItsOwnAudience(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	const audience = "nereid-di-server"
	gm := framework.StartGlobalManager(t, ns, "--edge-namespace", ns, "--di-server-address", "127.0.0.1:0",
		"--di-server-tls-secret", "nereid-di-server-tls", "--di-server-url", "https://127.0.0.1:8081", "--di-server-token-audiences", audience)
	addr := strings.TrimPrefix(replicasAPIAddress(t, gm), "http://")
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	pods, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	learner := pods["cartpole-dqn-learner-0"]
	if learner == nil {
		t.Fatalf("no learner among %v", keys(pods))
	}
	for _, want := range []string{"DI_SERVER_TOKEN_FILE", "DI_SERVER_CA_FILE"} {
		if !slices.ContainsFunc(learner.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == want }) {
			t.Errorf("the learner's environment lacks %s", want)
		}
	}
	caPEM := learner.Annotations[dijob.AnnotationServerCA]
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatalf("the learner's %s is no PEM certificate: %q", dijob.AnnotationServerCA, caPEM)
	}
	secret, err := framework.KubeClient(t).CoreV1().Secrets(ns).Get(t.Context(), "nereid-di-server-tls", metav1.GetOptions{})
	if err != nil || string(secret.Data["ca.crt"]) != caPEM {
		t.Fatalf("the Secret's CA is not the pods' (err %v)", err)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://%s/v2alpha1/job/%s.%s/replicas", addr, ns, diExample)

	// The token the kubelet projects into the learner: its ServiceAccount's,
	// for the API's audience, bound to the pod.
	own, err := framework.NewBoundToken(t.Context(), framework.KubeClient(t), learner, audience)
	if err != nil {
		t.Fatal(err)
	}
	if code, r := callReplicasAPIWith(t, trusting, http.MethodGet, url, own, ""); code != http.StatusOK || !r.Success {
		t.Errorf("GET with the learner's own token over verified TLS: %d %+v, want 200", code, r)
	}
	// The same pod's token for the API server is not one for this API.
	apiServer, err := framework.NewBoundToken(t.Context(), framework.KubeClient(t), learner, "")
	if err != nil {
		t.Fatal(err)
	}
	if code, r := callReplicasAPIWith(t, trusting, http.MethodGet, url, apiServer, ""); code != http.StatusUnauthorized {
		t.Errorf("GET with a token for the API server: %d %+v, want 401", code, r)
	}
	// No token crosses in clear, nor to a server the client cannot verify.
	resp, err := http.Get("http://" + addr + "/v2alpha1/job/" + ns + "." + diExample + "/replicas")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP: 200, want the TLS server's refusal")
		}
	}
	if _, err := http.Get(url); err == nil {
		t.Error("a client that does not trust the GlobalManager's CA connected")
	}
}
