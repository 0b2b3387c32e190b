package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seen is one request as the server got it.
type seen struct {
	Method, Path, Query string
	Body                any
}

// fakeV1Server answers every call with answer (status, body) and records
// what it was sent.
func fakeV1Server(t *testing.T, status int, answer string) (*httptest.Server, *[]seen) {
	t.Helper()
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &s.Body); err != nil {
				t.Errorf("%s %s: the body is not JSON: %q", r.Method, r.URL, raw)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type %q, want application/json", r.Method, r.URL, ct)
			}
		}
		if a := r.Header.Get("Authorization"); a != "" {
			t.Errorf("%s %s: a coordinator sends no token, got %q", r.Method, r.URL, a)
		}
		got = append(got, s)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

const answerData = `{"namespace":"demo","coordinator":"job-coordinator","collectors":["job-collector-abcde.demo:22270","job-collector-fghij.demo:22270"],"learners":["job-learner-klmno.demo:22271"]}`

// TestTheCoordinatorSendsWhatDIEngineSends pins each call's method, route,
// query and body to what DI-engine v0.2.2's operator_server.py sends, and
// reads DI-orchestrator's DIJobResponse back.
func TestTheCoordinatorSendsWhatDIEngineSends(t *testing.T) {
	wantData := v1Replicas{Namespace: "demo", Coordinator: "job-coordinator",
		Collectors: []string{"job-collector-abcde.demo:22270", "job-collector-fghij.demo:22270"}, Learners: []string{"job-learner-klmno.demo:22271"}}
	for name, tc := range map[string]struct {
		call func(v1Coordinator) (v1Replicas, diResponse, error)
		want seen
	}{
		"ask for replicas": {
			call: func(c v1Coordinator) (v1Replicas, diResponse, error) {
				return c.ask(t.Context(), v1Resources{Replicas: 2, CPUs: "1", GPUs: "0", Memory: "1Gi"}, v1Resources{Replicas: 1, GPUs: "0"})
			},
			want: seen{Method: "POST", Path: "/v1alpha1/replicas", Body: map[string]any{
				"namespace": "demo", "coordinator": "job-coordinator",
				"collectors": map[string]any{"replicas": 2.0, "cpus": "1", "gpus": "0", "memory": "1Gi"},
				"learners":   map[string]any{"replicas": 1.0, "gpus": "0"},
			}},
		},
		"list the replicas": {
			call: func(c v1Coordinator) (v1Replicas, diResponse, error) { return c.replicas(t.Context()) },
			want: seen{Method: "GET", Path: "/v1alpha1/replicas", Query: "coordinator=job-coordinator&namespace=demo"},
		},
		"report replicas failed": {
			call: func(c v1Coordinator) (v1Replicas, diResponse, error) {
				return c.failed(t.Context(), []string{"job-collector-abcde"}, nil)
			},
			want: seen{Method: "POST", Path: "/v1alpha1/replicas/failed", Body: map[string]any{
				"namespace": "demo", "coordinator": "job-coordinator", "collectors": []any{"job-collector-abcde"}, "learners": []any{},
			}},
		},
		"give replicas back": {
			call: func(c v1Coordinator) (v1Replicas, diResponse, error) { return c.release(t.Context(), 1, 0) },
			want: seen{Method: "DELETE", Path: "/v1alpha1/replicas", Body: map[string]any{
				"namespace": "demo", "coordinator": "job-coordinator",
				"collectors": map[string]any{"replicas": 1.0}, "learners": map[string]any{"replicas": 0.0},
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, got := fakeV1Server(t, http.StatusOK, `{"success":true,"code":0,"message":"successfully done","data":`+answerData+`}`)
			c := v1Coordinator{server: srv.URL, namespace: "demo", name: "job-coordinator", client: srv.Client(), retryFor: time.Second}
			data, r, err := tc.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]seen{tc.want}, *got); diff != "" {
				t.Errorf("what the server got (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(wantData, data); diff != "" {
				t.Errorf("the answer's data (-want,+got):\n%s", diff)
			}
			if r.Message != "successfully done" {
				t.Errorf("message %q, want the server's", r.Message)
			}
		})
	}
}

// TestTheCoordinatorSaysWhatTheServerRefused: an answer that is not a
// success is an error naming the call, the status and DI's message; one
// that is not DI's shape says so.
func TestTheCoordinatorSaysWhatTheServerRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		status      int
		answer      string
		wantErr     string
		wantRefused bool
	}{
		"not found": {status: http.StatusNotFound, answer: `{"success":false,"code":1,"message":"dijob demo/job not found","data":null}`,
			wantErr: "/v1alpha1/replicas: refused with 404 (code 1): dijob demo/job not found", wantRefused: true},
		"200 without success": {status: http.StatusOK, answer: `{"success":false,"code":1,"message":"no","data":null}`,
			wantErr: "refused with 200 (code 1): no", wantRefused: true},
		"not DI's shape": {status: http.StatusNotFound, answer: "404 page not found",
			wantErr: `404, not DI's answer: "404 page not found"`},
		"data of another shape": {status: http.StatusOK, answer: `{"success":true,"code":0,"message":"ok","data":["10.0.0.1:22270"]}`,
			wantErr: "data is not DI's DIJobResponse"},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fakeV1Server(t, tc.status, tc.answer)
			c := v1Coordinator{server: srv.URL, namespace: "demo", name: "job-coordinator", client: srv.Client(), retryFor: time.Second}
			_, _, err := c.ask(t.Context(), v1Resources{Replicas: 1}, v1Resources{Replicas: 1})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
			}
			if got := errors.Is(err, errDIRefused); got != tc.wantRefused {
				t.Errorf("errors.Is(err, errDIRefused) = %v, want %v", got, tc.wantRefused)
			}
		})
	}
}

func TestPodNameOfCutsTheURLAsDIEngineDoes(t *testing.T) {
	for url, want := range map[string]string{
		"job-collector-abcde.demo:22270": "job-collector-abcde",
		"job-learner-x.ns":               "job-learner-x",
		"pod":                            "pod",
		"a.b.c:1":                        "a.b",
	} {
		if got := podNameOf(url); got != want {
			t.Errorf("podNameOf(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestV1ServerURLIsPlainHTTPUnlessItSaysOtherwise(t *testing.T) {
	for env, want := range map[string]string{
		"127.0.0.1:28727":               "http://127.0.0.1:28727",
		"di-server.di-system:8080/":     "http://di-server.di-system:8080",
		"https://di-server.example:443": "https://di-server.example:443",
	} {
		if got := v1ServerURL(env); got != want {
			t.Errorf("v1ServerURL(%q) = %q, want %q", env, got, want)
		}
	}
}

func TestIsCoordinatorOfChecksDIOrchestratorsLabels(t *testing.T) {
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "job-coordinator", Labels: labels}}
	}
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		wantErr string
	}{
		"the coordinator": {pod: pod(map[string]string{"dijob-name": "job", "replica-type": "coordinator"})},
		"another job's":   {pod: pod(map[string]string{"dijob-name": "other", "replica-type": "coordinator"}), wantErr: `dijob-name="other"`},
		"a collector":     {pod: pod(map[string]string{"dijob-name": "job", "replica-type": "collector"}), wantErr: `replica-type="collector"`},
		"no labels":       {pod: pod(nil), wantErr: "is not job job's coordinator"},
	} {
		t.Run(name, func(t *testing.T) {
			err := isCoordinatorOf(tc.pod, "job")
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("isCoordinatorOf = %v, want an error saying %q (none if empty)", err, tc.wantErr)
			}
		})
	}
}
