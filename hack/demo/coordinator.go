package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// What a DI-engine v1 coordinator sends to DI-orchestrator v0.2's replicas
// server and reads back (DI-orchestrator v0.2.2 common/types/types.go,
// DI-engine v0.2.2 ding/worker/coordinator/operator_server.py).

// v1Resources is DI's ResourceQuantity: how many replicas of a type, and
// what each needs (quantities as strings; DELETE sends the count alone).
type v1Resources struct {
	Replicas int    `json:"replicas"`
	CPUs     string `json:"cpus,omitempty"`
	GPUs     string `json:"gpus,omitempty"`
	Memory   string `json:"memory,omitempty"`
}

// v1ReplicasRequest is DI's DIJobRequest, the body of POST and DELETE
// /v1alpha1/replicas.
type v1ReplicasRequest struct {
	Namespace   string      `json:"namespace"`
	Coordinator string      `json:"coordinator"`
	Collectors  v1Resources `json:"collectors"`
	Learners    v1Resources `json:"learners"`
}

// v1Replicas is DI's DIJobResponse: the data of every answer, the
// replicas' URLs "<pod>.<namespace>:<port>", and the body of POST
// /v1alpha1/replicas/failed, the failed replicas' pod names.
type v1Replicas struct {
	Namespace   string   `json:"namespace"`
	Coordinator string   `json:"coordinator"`
	Collectors  []string `json:"collectors"`
	Learners    []string `json:"learners"`
}

// v1Coordinator plays a v1 coordinator against the v1 replicas server.
type v1Coordinator struct {
	// server is the server's base URL, from the coordinator's
	// KUBERNETES_SERVER_URL (v1ServerURL).
	server          string
	namespace, name string
	// client speaks from the coordinator pod's address: without a token,
	// the server takes a coordinator's calls from nowhere else.
	client *http.Client
	// retryFor bounds how long a call is sent again while the server
	// cannot be reached, answers 5xx, or does not know the pod's address
	// yet (403).
	retryFor time.Duration
}

// v1ServerURL is the base URL of KUBERNETES_SERVER_URL, which DI-engine
// gives as host:port and calls over plain HTTP.
func v1ServerURL(env string) string {
	if strings.Contains(env, "://") {
		return strings.TrimSuffix(env, "/")
	}
	return "http://" + strings.TrimSuffix(env, "/")
}

// replicasPath is the v1 server's route of replicas.
const replicasPath = "/v1alpha1/replicas"

func (c v1Coordinator) call(ctx context.Context, method, path string, body any) (v1Replicas, diResponse, error) {
	dc := diCall{method: method, url: c.server + path, body: body, retryForbidden: true}
	r, err := dc.do(ctx, c.client, c.retryFor)
	if err != nil {
		return v1Replicas{}, r, err
	}
	var got v1Replicas
	if err := json.Unmarshal(r.Data, &got); err != nil {
		return v1Replicas{}, r, fmt.Errorf("%s %s: data is not DI's DIJobResponse: %s", method, dc.url, truncate(r.Data, 200))
	}
	return got, r, nil
}

// ask is POST /v1alpha1/replicas: the coordinator asks for collectors
// and learners; the answer lists the replicas made.
func (c v1Coordinator) ask(ctx context.Context, collectors, learners v1Resources) (v1Replicas, diResponse, error) {
	return c.call(ctx, http.MethodPost, replicasPath, v1ReplicasRequest{Namespace: c.namespace, Coordinator: c.name, Collectors: collectors, Learners: learners})
}

// replicas is GET /v1alpha1/replicas?namespace=…&coordinator=…: every
// replica of the coordinator's job.
func (c v1Coordinator) replicas(ctx context.Context) (v1Replicas, diResponse, error) {
	q := url.Values{"namespace": {c.namespace}, "coordinator": {c.name}}
	return c.call(ctx, http.MethodGet, replicasPath+"?"+q.Encode(), nil)
}

// failed is POST /v1alpha1/replicas/failed: the replicas the coordinator
// lost contact with, by pod name, to be made again.
func (c v1Coordinator) failed(ctx context.Context, collectors, learners []string) (v1Replicas, diResponse, error) {
	return c.call(ctx, http.MethodPost, replicasPath+"/failed", v1Replicas{Namespace: c.namespace, Coordinator: c.name, Collectors: nonNil(collectors), Learners: nonNil(learners)})
}

// release is DELETE /v1alpha1/replicas: the coordinator gives back that
// many collectors and learners; the answer lists those deleted.
func (c v1Coordinator) release(ctx context.Context, collectors, learners int) (v1Replicas, diResponse, error) {
	return c.call(ctx, http.MethodDelete, replicasPath, v1ReplicasRequest{Namespace: c.namespace, Coordinator: c.name,
		Collectors: v1Resources{Replicas: collectors}, Learners: v1Resources{Replicas: learners}})
}

// nonNil sends an empty list as [], as DI-engine does, not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// podNameOf is the pod name in a replica's URL "<pod>.<namespace>:<port>",
// as DI-engine's coordinator cuts it before it reports the replica failed.
func podNameOf(replicaURL string) string {
	host := strings.Split(replicaURL, ":")[0]
	parts := strings.Split(host, ".")
	if len(parts) == 1 {
		return host
	}
	return strings.Join(parts[:len(parts)-1], ".")
}
