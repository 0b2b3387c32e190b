package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/hack/localrun"
	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/test/framework"
)

const (
	dijobV1Namespace = "bench-dijob-v1"
	// v1Collectors and v1Learners are what each bench coordinator asks for.
	v1Collectors, v1Learners = 4, 1
	// v1Callers is how many coordinators ask at once.
	v1Callers = 16
)

// benchDIJobV1 measures v1alpha1 (coordinator-driven) DIJobs on a
// GlobalManager serving the conversion webhook and the v1 replicas server:
//
//   - coordinators: o.v1Jobs jobs created at once (through the conversion
//     webhook); time until every coordinator pod and its Service exist;
//   - replicas: each job's coordinator then asks the v1 server for 4
//     collectors and 1 learner (v1Callers at a time, with a token that may
//     update the jobs: the bench is not in the coordinators' pods); each
//     answer's latency, and the time until every replica's pod and Service
//     exist.
//
// It deletes its namespace, and waits until it is gone, before it returns.
func benchDIJobV1(ctx context.Context, o dijobOptions, kube kubernetes.Interface, sedna sednaclient.Interface) (results []result, err error) {
	const ns = dijobV1Namespace
	n := o.v1Jobs
	gm, logPath, err := startV1GlobalManager(ctx, kube, ns)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = gm.Signal(syscall.SIGTERM, 15*time.Second)
		progress("dijob v1: removing namespace %s", ns)
		err = errors.Join(err, deleteNamespace(context.WithoutCancel(ctx), kube, ns))
	}()
	server, err := v1ServerOf(ctx, gm)
	if err != nil {
		return nil, fmt.Errorf("%w (GlobalManager log: %s)", err, logPath)
	}
	token, err := coordinatorToken(ctx, kube, ns)
	if err != nil {
		return nil, err
	}
	pods, err := newPodWatcher(ctx, kube, ns)
	if err != nil {
		return nil, err
	}

	progress("dijob v1: %d v1alpha1 DIJobs at once, each coordinator then asking for %d collectors and %d learner", n, v1Collectors, v1Learners)
	u0, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := createV1Jobs(ctx, sedna, ns, n); err != nil {
		return nil, err
	}
	if err := pods.waitFor(ctx, 10*time.Minute, func() bool { return len(pods.pods) >= n && pods.services >= n }); err != nil {
		return nil, fmt.Errorf("coordinators: %w (GlobalManager log: %s)", err, logPath)
	}
	coordinators := time.Since(start)
	progress("dijob v1: %d coordinators and their Services in %s", n, coordinators.Round(time.Millisecond))

	asked := time.Now()
	latencies, err := askForReplicas(ctx, server, token, ns, n)
	if err != nil {
		return nil, fmt.Errorf("%w (GlobalManager log: %s)", err, logPath)
	}
	answered := time.Since(asked)
	all := n * (1 + v1Collectors + v1Learners)
	if err := pods.waitFor(ctx, 10*time.Minute, func() bool { return len(pods.pods) >= all && pods.services >= all }); err != nil {
		return nil, fmt.Errorf("replicas: %w (GlobalManager log: %s)", err, logPath)
	}
	replicas := time.Since(asked)
	u1, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	made := n * (v1Collectors + v1Learners)
	return []result{
		{Name: "DIJob v1: coordinators+services created", Value: round(float64(2*n) / coordinators.Seconds()), Unit: "objects/s",
			Note: fmt.Sprintf("%d v1alpha1 DIJobs created at once through the conversion webhook; %d coordinator pods and Services in %s", n, n, coordinators.Round(time.Millisecond))},
		{Name: "DIJob v1: coordinators' requests answered", Value: round(float64(n) / answered.Seconds()), Unit: "requests/s",
			Note: fmt.Sprintf("POST /v1alpha1/replicas for %d collectors + %d learner each, %d at a time; latency p50 %s, p99 %s",
				v1Collectors, v1Learners, v1Callers, percentile(latencies, 50).Round(time.Millisecond), percentile(latencies, 99).Round(time.Millisecond))},
		{Name: "DIJob v1: replicas' pods+services created", Value: round(float64(2*made) / replicas.Seconds()), Unit: "objects/s",
			Note: fmt.Sprintf("%d pods (by the server) and %d Services (by the controller) in %s from the first request; %s", made, made, replicas.Round(time.Millisecond), describeUsage(u0, u1, time.Since(start)))},
	}, nil
}

// startV1GlobalManager starts a GlobalManager managing ns, with the
// conversion webhook and the v1 replicas server on loopback ports, and
// waits until it acts and the DIJob CRD points at its webhook.
func startV1GlobalManager(ctx context.Context, kube kubernetes.Interface, ns string) (*framework.Process, string, error) {
	bin, err := framework.BuildBinary("globalmanager")
	if err != nil {
		return nil, "", err
	}
	logPath := filepath.Join(framework.RepoRoot(), "_output", "bench", "globalmanager-dijob-v1.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, "", err
	}
	_ = os.Remove(logPath)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, "", err
	}
	if err := waitForServiceAccount(ctx, kube, ns); err != nil {
		return nil, "", err
	}
	gm, err := startGlobalManager(ctx, bin, logPath, localrun.GlobalManager{
		Namespace: ns, HealthAddress: "127.0.0.1:0", LeaseNamespace: framework.SystemNamespace, DIJobConversion: "127.0.0.1:0",
		Extra: []string{"--di-v1-server-address=127.0.0.1:0", "--di-v1-server-url=127.0.0.1:8080"},
	})
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(ctx, gm, time.Minute); err != nil {
		_ = gm.Signal(syscall.SIGTERM, 15*time.Second)
		return nil, "", fmt.Errorf("%w (GlobalManager log: %s)", err, logPath)
	}
	return gm, logPath, nil
}

// v1ServerOf is where gm serves the v1 replicas server, as its log says.
func v1ServerOf(ctx context.Context, gm *framework.Process) (string, error) {
	var addr string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		addr = gm.V1ServerAddress()
		return addr != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("the v1 replicas server did not listen: %w", err)
	}
	return "http://" + addr, nil
}

// coordinatorToken is a token of a ServiceAccount of ns that may update
// its DIJobs: what the v1 server takes from outside the coordinators' pods.
func coordinatorToken(ctx context.Context, kube kubernetes.Interface, ns string) (string, error) {
	const name = "bench-coordinator"
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{div2.GroupName}, Resources: []string{"dijobs"}, Verbs: []string{"get", "update"}}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// createV1Jobs creates n v1alpha1 DIJobs at once, retrying the first until
// the API server has taken the CRD's webhook.
func createV1Jobs(ctx context.Context, sedna sednaclient.Interface, ns string, n int) error {
	create := func(ctx context.Context, name string) error {
		_, err := sedna.DiengineV1alpha1().DIJobs(ns).Create(ctx, benchDIJobV1Spec(name), metav1.CreateOptions{})
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return create(ctx, "job-0") == nil, nil
	}); err != nil {
		return fmt.Errorf("the first v1alpha1 DIJob was not taken within a minute (the conversion webhook): %w", err)
	}
	return createAtOnce(ctx, n, func(ctx context.Context, name string) error {
		if name == "job-0" {
			return nil // made above
		}
		return create(ctx, name)
	})
}

// benchDIJobV1Spec is a v1 job of DI-orchestrator's shape: a coordinator,
// a collector and a learner template, di-container each.
func benchDIJobV1Spec(name string) *div1.DIJob {
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: coordinated.ContainerName, Image: "opendilab/ding:nightly", Command: []string{"ding", "-m", "dist"},
	}}}}
	return &div1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: div1.DIJobSpec{
			Coordinator: &div1.CoordinatorSpec{Template: template},
			Collector:   &div1.CollectorSpec{Template: template},
			Learner:     &div1.LearnerSpec{Template: template},
		},
	}
}

// askForReplicas has each job's coordinator ask for its replicas,
// v1Callers at a time, and returns each answer's latency.
func askForReplicas(ctx context.Context, server, token, ns string, n int) ([]time.Duration, error) {
	jobs := make(chan int)
	var mu sync.Mutex
	var latencies []time.Duration
	var errs []error
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute}
	for range v1Callers {
		wg.Go(func() {
			for i := range jobs {
				took, err := askOnce(ctx, client, server, token, ns, i)
				mu.Lock()
				latencies, errs = append(latencies, took), append(errs, err)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return latencies, errors.Join(errs...)
}

// askOnce is job i's coordinator's POST; it retries while the server's
// cache does not have the coordinator yet (404), as DI-engine does.
func askOnce(ctx context.Context, client *http.Client, server, token, ns string, i int) (time.Duration, error) {
	job := fmt.Sprintf("job-%d", i) // createAtOnce's names
	body, _ := json.Marshal(map[string]any{
		"namespace": ns, "coordinator": coordinated.CoordinatorName(job),
		"collectors": map[string]any{"replicas": v1Collectors}, "learners": map[string]any{"replicas": v1Learners},
	})
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/v1alpha1/replicas", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("job %s's coordinator: %w", job, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		switch {
		case resp.StatusCode == http.StatusOK:
			return took, nil
		case (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusTooManyRequests) && attempt < 50:
			time.Sleep(200 * time.Millisecond)
		default:
			return took, fmt.Errorf("job %s's coordinator: %d %s", job, resp.StatusCode, answer)
		}
	}
}
