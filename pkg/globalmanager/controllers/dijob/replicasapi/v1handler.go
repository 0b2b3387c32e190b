package replicasapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The v1 server's routes (DI-orchestrator v0.2.2 server/http/server.go).
const (
	v1ReplicasPath = "/v1alpha1/replicas"
	v1FailedPath   = "/v1alpha1/replicas/failed"
	v1HealthPath   = "/healthz"
)

// The v1 server's actions, as logs and metrics name them.
const (
	actionV1GetReplicas    action = "v1_get_replicas"
	actionV1AddReplicas    action = "v1_add_replicas"
	actionV1DeleteReplicas action = "v1_delete_replicas"
	actionV1FailedReplicas action = "v1_failed_replicas"
)

// IdempotencyKeyHeader names the header that makes a repeated change
// answer the first one's result.
const IdempotencyKeyHeader = "Idempotency-Key"

// maxIdempotencyKeyLength bounds an Idempotency-Key.
const maxIdempotencyKeyLength = 255

// v1Resources is DI's ResourceQuantity: how many replicas of a type, and
// what each gets. A quantity is a JSON string ("500m", "1") or number (1,
// 0.5), as resource.Quantity reads both; zero or absent sets nothing.
type v1Resources struct {
	Replicas int               `json:"replicas"`
	CPU      resource.Quantity `json:"cpus"`
	GPU      resource.Quantity `json:"gpus"`
	Memory   resource.Quantity `json:"memory"`
}

// v1ReplicasRequest is DI's DIJobRequest, the body of POST and DELETE.
type v1ReplicasRequest struct {
	Namespace   string      `json:"namespace"`
	Coordinator string      `json:"coordinator"`
	Collectors  v1Resources `json:"collectors"`
	Learners    v1Resources `json:"learners"`
}

// v1JobResponse is DI's DIJobResponse: the body of replicas/failed, and the
// data of every answer but a GET of a namespace or more.
type v1JobResponse struct {
	Namespace   string   `json:"namespace"`
	Coordinator string   `json:"coordinator"`
	Collectors  []string `json:"collectors"`
	Learners    []string `json:"learners"`
}

// V1Handler returns the v1 replicas server's routes: DI-orchestrator
// v0.2.2's di-server, which DI-engine's v1 coordinator and aggregators
// call at KUBERNETES_SERVER_URL. See docs/dijob-v1alpha1.md, "The v1
// replicas server".
func (s *Server) V1Handler() http.Handler {
	api := s.serveWith(s.handleV1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == v1HealthPath {
			// DI's healthz: 200 and no body, whatever the method.
			w.WriteHeader(http.StatusOK)
			return
		}
		api(w, r)
	})
}

// handleV1 routes a v1 request; each route decides who may call it.
func (s *Server) handleV1(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply {
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	default:
		return unavailable(ErrBusy, "too many requests are being handled, try again later")
	}
	act, rep := parseV1Route(r)
	ex.act = act
	if rep != nil {
		return rep
	}
	switch act {
	case actionV1GetReplicas:
		return s.v1Get(ctx, r, ex)
	case actionV1AddReplicas:
		return s.v1Add(ctx, w, r, ex)
	case actionV1DeleteReplicas:
		return s.v1Delete(ctx, w, r, ex)
	default:
		return s.v1Failed(ctx, w, r, ex)
	}
}

// parseV1Route is a request's action: 404 for another path, 501 for
// another method (DI's ErrorNotImplemented).
func parseV1Route(r *http.Request) (action, *reply) {
	switch {
	case r.URL.Path == v1ReplicasPath && r.Method == http.MethodGet:
		return actionV1GetReplicas, nil
	case r.URL.Path == v1ReplicasPath && r.Method == http.MethodPost:
		return actionV1AddReplicas, nil
	case r.URL.Path == v1ReplicasPath && r.Method == http.MethodDelete:
		return actionV1DeleteReplicas, nil
	case r.URL.Path == v1FailedPath && r.Method == http.MethodPost:
		return actionV1FailedReplicas, nil
	case r.URL.Path == v1ReplicasPath || r.URL.Path == v1FailedPath:
		return actionUnknown, fail(http.StatusNotImplemented, "%s not implemented", truncate(r.Method))
	}
	return actionUnknown, fail(http.StatusNotFound, "no such route: the routes are %s (GET, POST, DELETE), %s (POST) and %s", v1ReplicasPath, v1FailedPath, v1HealthPath)
}

// v1Body reads a request body of at most Config.MaxBodyBytes and decodes
// it into v as DI did: fields v does not have are ignored. It returns the
// body's hash, for an Idempotency-Key.
func (s *Server) v1Body(w http.ResponseWriter, r *http.Request, v any) ([sha256.Size]byte, *reply) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		// Decoding what was read tells the bound or the error.
		return [sha256.Size]byte{}, s.decodeJSON(io.MultiReader(bytes.NewReader(raw), errReader{err}), v, false)
	}
	if rep := s.decodeJSON(bytes.NewReader(raw), v, false); rep != nil {
		return [sha256.Size]byte{}, rep
	}
	return sha256.Sum256(raw), nil
}

// errReader fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// checkCaller refuses a body that names no namespace or caller pod.
func checkCaller(namespace, pod string) *reply {
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return fail(http.StatusBadRequest, `"namespace" must be a namespace: %s`, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(pod); len(msgs) > 0 {
		return fail(http.StatusBadRequest, `"coordinator" must name the coordinator's (or an aggregator's) pod: %s`, strings.Join(msgs, "; "))
	}
	return nil
}

// maxQuantity bounds a quantity: the largest whose thousandths are an
// int64. Past it MilliValue and Value wrap ("1e300" reads 0), and so do
// the scheduler's and the kubelet's sums, which read them.
var maxQuantity = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)

// checkResources refuses replicas below 0 or over the request bound, a
// negative quantity or one past maxQuantity, and GPUs that are not whole.
func (s *Server) checkResources(field string, r *v1Resources) *reply {
	limit := s.cfg.V1.MaxReplicasPerRequest
	switch {
	case r.Replicas < 0 || r.Replicas > limit:
		return fail(http.StatusBadRequest, "%s.replicas must be between 0 and %d (the bound of replicas per request), not %d", field, limit, r.Replicas)
	case r.CPU.Sign() < 0 || r.GPU.Sign() < 0 || r.Memory.Sign() < 0:
		return fail(http.StatusBadRequest, "%s: cpus, gpus and memory must not be negative", field)
	case r.CPU.Cmp(maxQuantity) > 0 || r.GPU.Cmp(maxQuantity) > 0 || r.Memory.Cmp(maxQuantity) > 0:
		return fail(http.StatusBadRequest, "%s: cpus, gpus and memory must be at most %s", field, maxQuantity.String())
	case r.GPU.MilliValue()%1000 != 0:
		return fail(http.StatusBadRequest, "%s.gpus must be a whole number, not %s", field, r.GPU.String())
	}
	return nil
}

// idempotencyKey is the request's Idempotency-Key ("" without one): 400
// when it is longer than maxIdempotencyKeyLength or not printable ASCII.
func idempotencyKey(r *http.Request) (string, *reply) {
	values := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", fail(http.StatusBadRequest, "give one %s header, not %d", IdempotencyKeyHeader, len(values))
	}
	key := values[0]
	ok := key != "" && len(key) <= maxIdempotencyKeyLength && strings.IndexFunc(key, func(c rune) bool {
		return c > unicode.MaxASCII || !unicode.IsPrint(c)
	}) < 0
	if !ok {
		return "", fail(http.StatusBadRequest, "%s must be 1 to %d printable ASCII characters", IdempotencyKeyHeader, maxIdempotencyKeyLength)
	}
	return key, nil
}

// v1Quote is s quoted, truncated for a message.
func v1Quote(s string) string { return fmt.Sprintf("%q", truncate(s)) }
