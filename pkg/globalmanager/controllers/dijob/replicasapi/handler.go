package replicasapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// response is DI-orchestrator's answer body (pkg/server/types.Response).
type response struct {
	Success bool   `json:"success"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// DI's codes (pkg/server/types: CodeSuccess, CodeFailed).
const (
	codeSuccess = 0
	codeFailed  = 1
)

// action is what a request asks for; it labels logs and metrics.
type action string

const (
	actionUnknown        action = "unknown"
	actionGetReplicas    action = "get_replicas"
	actionAddReplicas    action = "add_replicas"
	actionDeleteReplicas action = "delete_replicas"
	actionPostProfilings action = "post_profilings"
)

// writes reports whether the action changes the job.
func (a action) writes() bool {
	return a != actionGetReplicas && a != actionUnknown && a != actionV1GetReplicas
}

// apiVersionPrefix starts every route: /v2alpha1/job/{id}/{resource}.
const apiVersionPrefix = "/v2alpha1/job/"

// reply is the outcome of a request: its status, message and data, and the
// error behind a failure of this server (logged, never sent).
type reply struct {
	status  int
	message string
	data    any
	err     error
	header  map[string]string
}

func ok(message string, data any) *reply {
	return &reply{status: http.StatusOK, message: message, data: data}
}

func fail(status int, format string, args ...any) *reply {
	return &reply{status: status, message: fmt.Sprintf(format, args...)}
}

// unavailable is a failure that a retry may mend: err is logged, message
// told.
func unavailable(err error, message string) *reply {
	return &reply{status: http.StatusServiceUnavailable, message: message, err: err, header: map[string]string{"Retry-After": "1"}}
}

// internal is a failure of this server: err is logged, message told.
func internal(err error, message string) *reply {
	return &reply{status: http.StatusInternalServerError, message: message, err: err}
}

// exchange is what is known of a request as it is handled, for its log line.
type exchange struct {
	act  action
	user string
}

// handlerFunc acts on a request and says what to answer.
type handlerFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply

// serveWith is an http.Handler that answers what handle says, as DI's
// response, bounded by Config.RequestTimeout, logged and counted.
func (s *Server) serveWith(handle handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveHTTP(w, r, handle) }
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, handle handlerFunc) {
	start := s.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	ex := exchange{act: actionUnknown}
	rep := handle(ctx, w, r, &ex)
	write(w, rep)

	s.metrics.count(ex.act, rep.status)
	logger := klog.FromContext(ctx)
	kv := []any{"method", r.Method, "path", truncate(r.URL.Path), "user", ex.user, "remote", r.RemoteAddr, "code", rep.status, "took", s.cfg.Clock.Since(start)}
	switch {
	case rep.status >= http.StatusInternalServerError && rep.status != http.StatusNotImplemented && !errors.Is(rep.err, ErrBusy):
		logger.Error(rep.err, "DIJob API request failed", append(kv, "message", rep.message)...)
	case rep.status == http.StatusOK && !ex.act.writes():
		logger.V(4).Info("DIJob API request", kv...)
	default:
		logger.V(2).Info("DIJob API request", append(kv, "message", rep.message)...)
	}
}

// maxLoggedPath bounds the path in a log line: anyone may send one as long
// as the header bound.
const maxLoggedPath = 256

func truncate(path string) string {
	if len(path) <= maxLoggedPath {
		return path
	}
	return path[:maxLoggedPath] + "..."
}

// handle routes, authenticates and authorizes a request, then acts on it.
func (s *Server) handle(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply {
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	default:
		return unavailable(ErrBusy, "too many requests are being handled, try again later")
	}
	act, key, rep := parseRoute(r)
	ex.act = act
	if rep != nil {
		return rep
	}
	user, rep := s.authenticate(ctx, r)
	if rep != nil {
		return rep
	}
	ex.user = user.Username
	job, rep := s.authorize(ctx, user, act, key)
	if rep != nil {
		return rep
	}
	switch act {
	case actionGetReplicas:
		return s.getReplicas(ctx, job)
	case actionAddReplicas, actionDeleteReplicas:
		return s.scale(ctx, w, r, job, act)
	default:
		return s.postProfilings(ctx, w, r, job)
	}
}

// parseRoute reads the action and the job of a request's path and method: 404
// for another path, 405 for another method, 400 for a malformed id.
func parseRoute(r *http.Request) (action, types.NamespacedName, *reply) {
	var key types.NamespacedName
	rest, found := strings.CutPrefix(r.URL.Path, apiVersionPrefix)
	id, resource, _ := strings.Cut(rest, "/")
	if !found || id == "" || strings.Contains(resource, "/") {
		return actionUnknown, key, fail(http.StatusNotFound, "no such route: the routes are /v2alpha1/job/{namespace}.{name}/replicas and /v2alpha1/job/{namespace}.{name}/profilings")
	}
	var act action
	var allow string
	switch resource {
	case "replicas":
		allow = "GET, POST, DELETE"
		switch r.Method {
		case http.MethodGet:
			act = actionGetReplicas
		case http.MethodPost:
			act = actionAddReplicas
		case http.MethodDelete:
			act = actionDeleteReplicas
		}
	case "profilings":
		allow = "POST"
		if r.Method == http.MethodPost {
			act = actionPostProfilings
		}
	default:
		return actionUnknown, key, fail(http.StatusNotFound, "no such route: the routes are /v2alpha1/job/{namespace}.{name}/replicas and /v2alpha1/job/{namespace}.{name}/profilings")
	}
	if act == "" {
		rep := fail(http.StatusMethodNotAllowed, "method %s is not allowed on %s: use %s", r.Method, resource, allow)
		rep.header = map[string]string{"Allow": allow}
		return actionUnknown, key, rep
	}
	key, err := parseJobID(id)
	if err != nil {
		return act, key, fail(http.StatusBadRequest, "%v", err)
	}
	return act, key, nil
}

// parseJobID reads DI's job id, namespace.name; both must be DNS labels.
func parseJobID(id string) (types.NamespacedName, error) {
	parts := strings.Split(id, ".")
	if len(parts) != 2 {
		return types.NamespacedName{}, fmt.Errorf("job id %s must be in namespace.name format", strconv.Quote(id))
	}
	for _, p := range parts {
		if errs := validation.IsDNS1123Label(p); len(errs) > 0 {
			return types.NamespacedName{}, fmt.Errorf("job id %s: %s is not a namespace or DIJob name: %s", strconv.Quote(id), strconv.Quote(p), strings.Join(errs, "; "))
		}
	}
	return types.NamespacedName{Namespace: parts[0], Name: parts[1]}, nil
}

// write sends rep as DI's response.
func write(w http.ResponseWriter, rep *reply) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	for k, v := range rep.header {
		h.Set(k, v)
	}
	body := response{Success: rep.status == http.StatusOK, Code: codeSuccess, Message: rep.message, Data: rep.data}
	if !body.Success {
		body.Code, body.Data = codeFailed, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		// The data are strings; this is a bug, told as such.
		b = []byte(`{"success":false,"code":1,"message":"internal error: the answer could not be encoded","data":null}`)
		rep.status = http.StatusInternalServerError
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(append(b, '\n')) // a client gone is no one to tell
}

// readJSON decodes the body of r into v: 413 past the server's bound, 400 for
// anything but one JSON value of v's shape.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) *reply {
	return s.decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), v, true)
}

// decodeJSON decodes one JSON value of v's shape from body: 413 past the
// server's bound, 400 for anything else, or for a field v does not have
// when strict.
func (s *Server) decodeJSON(body io.Reader, v any, strict bool) *reply {
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		// One value and nothing after it.
		if _, terr := dec.Token(); terr == nil {
			err = errors.New("unexpected data after the JSON object")
		} else if !errors.Is(terr, io.EOF) {
			err = terr
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return fail(http.StatusRequestEntityTooLarge, "the request body is larger than %d bytes", tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return fail(http.StatusBadRequest, "the request body is empty: a JSON object is expected")
	default:
		return fail(http.StatusBadRequest, "the request body is not valid: %v", err)
	}
}

// writeTurn waits, at most reviewQueueTimeout, for the rate of writes to
// let one more through: nil, or 503.
func (s *Server) writeTurn(ctx context.Context) *reply {
	waitCtx, cancel := context.WithTimeout(ctx, reviewQueueTimeout)
	defer cancel()
	if err := waitRate(ctx, waitCtx, s.writes); err != nil {
		return unavailable(err, "too many DIJob changes are being made, try again later")
	}
	return nil
}

// writeFailure is the reply to a failed write of job: 404 when it is gone,
// 409 when it kept changing under the retries, 400 when the API server found
// the change invalid, 500 otherwise (message told, err logged).
func writeFailure(err error, job *div2alpha1.DIJob, message string) *reply {
	switch {
	case apierrors.IsNotFound(err):
		return fail(http.StatusNotFound, "DIJob %s not found", klog.KObj(job))
	case apierrors.IsConflict(err):
		return fail(http.StatusConflict, "DIJob %s kept changing while it was updated; try again", klog.KObj(job))
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fail(http.StatusBadRequest, "the API server refused the change: %v", err)
	}
	return internal(fmt.Errorf("writing DIJob %s: %w", klog.KObj(job), err), message)
}
