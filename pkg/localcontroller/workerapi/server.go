// Package workerapi is the HTTP API the ML workers on an edge node call:
// Sedna's `POST /sedna/workers/{worker-name}/info`. A report is written to the
// LocalController's on-disk outbox before the worker gets its 200, so an
// answered report is never lost; a report that cannot be taken gets a 4xx or
// 5xx with the reason, never a silent 200.
//
// # Who may report
//
// Sedna's workers send no credentials, so a worker is known by where it
// calls from. The GlobalManager sends, with each object, its worker pods on
// this node and their addresses (a pod's IPs; a hostNetwork pod's are its
// node's, the weaker case: any process of the node's network speaks from
// them). A report for a worker is taken only from that worker's address:
//
//   - a connection from an address that is no worker's of the node is closed
//     as it is accepted (Server.Listener), so it holds none of the API's
//     connections; while a worker of the node has no address yet (its pod is
//     starting), at most MaxUnknownConnections such connections are served
//     at once, for it may be that worker; from one worker's address, at most
//     MaxConnectionsPerAddress;
//   - a request naming a worker that is not at the caller's address is
//     answered 403 before its body is read; a worker whose address has not
//     come yet is waited for, up to AddressWait;
//   - once the body is read, the report is for the object whose pod the
//     worker is, at that address, whatever the body says (Sedna's own
//     workers do not always say it right: ownerOf); the body goes up saying
//     that object.
package workerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/serving"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// MaxBodyBytes bounds one worker report; Sedna's reports are a few KiB.
const MaxBodyBytes = 256 << 10

// Limits bound what the worker API's callers may hold of the
// LocalController: any process that reaches its port can call it, and the
// LocalController runs with a few hundred MiB. A request's headers must come
// within 5 s and the whole request within 30 s; an answer not read within
// 30 s is cut off; a keep-alive connection idle for 90 s is closed; at most
// 256 connections are open at once (more wait to be accepted).
var Limits = serving.Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       90 * time.Second,
	MaxHeaderBytes:    16 << 10,
	MaxConnections:    256,
}

// MaxInFlight bounds the reports parsed and written to disk at once, once
// their bodies are read (reading is bounded by Limits.MaxConnections and
// MaxBodyBytes: a caller that sends its body slowly holds no slot); a report
// waits up to inFlightWait for a slot, then is answered 503 with
// Retry-After. Sedna's workers do not send a report again after an answer,
// so a burst waits rather than being refused.
const MaxInFlight = 32

// inFlightWait is how long a read report waits for one of MaxInFlight.
const inFlightWait = 10 * time.Second

// maxReasonBytes bounds the reason of a refusal, which echoes parts of the
// request.
const maxReasonBytes = 4 << 10

// Outbox is where reports wait for the cloud; AppendWorkerReport returns
// once the report is on disk, or refuses it when the worker holds more than
// its share.
type Outbox interface {
	AppendWorkerReport(worker string, data []byte) (uint64, error)
}

// Owners says whether the LocalController holds the object a worker reports
// for (the GlobalManager sends each node the jobs and services it has workers
// of), which of its pods are on the node, and at which addresses.
type Owners interface {
	GetWorkers(key store.Key) (workers []edgeproto.Worker, found bool, err error)
	// WorkerOwners are the objects naming worker as their pod on the node.
	WorkerOwners(worker string) []store.Key
	// AddressAdmission says whether addr is some worker's, and whether
	// some worker has no address yet.
	AddressAdmission(addr netip.Addr) (known, awaiting bool)
	// WaitWorkerAt says whether worker is at addr, waiting, until ctx
	// ends, while worker has no address yet.
	WaitWorkerAt(ctx context.Context, worker string, addr netip.Addr) bool
}

// AddressWait is how long a report naming a worker whose address has not
// come yet waits for it: the pod's IP comes to the GlobalManager with the
// kubelet's status and then down to the node, a second or so after the
// worker may first call.
const AddressWait = 10 * time.Second

// MaxUnknownConnections bounds the connections served at once from
// addresses that are no worker's, while some worker has no address yet.
const MaxUnknownConnections = 16

// MaxConnectionsPerAddress bounds the connections served at once from one
// worker's address, so that one worker (or anything at the node's address,
// a hostNetwork worker's) cannot hold all of Limits.MaxConnections and shut
// the node's other workers out.
const MaxConnectionsPerAddress = 32

// Server serves the worker API.
type Server struct {
	outbox   Outbox
	owners   Owners
	logger   klog.Logger
	inFlight chan struct{}
	// unknown counts the connections open from addresses no worker has.
	unknown atomic.Int64
	// perAddress counts the connections open from each worker's address.
	perAddressMu sync.Mutex
	perAddress   map[netip.Addr]int
	// Refused counts the connections closed as they were accepted, from
	// addresses no worker has; nil counts nothing.
	Refused func()
	// refusalLog bounds the refused reports logged; refusalsNotLogged
	// counts those it held back since the last one logged.
	refusalLog        *rate.Limiter
	refusalsNotLogged atomic.Int64

	// Test seams.
	clock        clock.Clock   // stamps reports, times the wait for a slot
	maxBodyBytes int64         // MaxBodyBytes
	inFlightWait time.Duration // inFlightWait
	addressWait  time.Duration // AddressWait
}

// NewServer returns a worker API that appends to outbox and checks owners.
func NewServer(logger klog.Logger, outbox Outbox, owners Owners) *Server {
	return &Server{outbox: outbox, owners: owners, logger: logger, clock: clock.RealClock{}, maxBodyBytes: MaxBodyBytes,
		inFlight: make(chan struct{}, MaxInFlight), inFlightWait: inFlightWait, addressWait: AddressWait,
		perAddress: make(map[netip.Addr]int), refusalLog: rate.NewLimiter(rate.Every(time.Second), refusalLogBurst)}
}

// refusalLogBurst is how many refused reports are logged at once.
const refusalLogBurst = 10

// Listener is ln serving only the connections from workers' addresses (and,
// while a worker has none yet, at most MaxUnknownConnections others); put
// it under Limits.Listener.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return serving.Filter(ln, s.admit, s.Refused)
}

// admit admits a connection from a worker's address; from another, one of
// MaxUnknownConnections while some worker has no address yet.
func (s *Server) admit(addr netip.Addr) (func(), bool) {
	known, awaiting := s.owners.AddressAdmission(addr)
	switch {
	case known:
		return s.admitFrom(addr)
	case !awaiting:
		return nil, false
	}
	if s.unknown.Add(1) > MaxUnknownConnections {
		s.unknown.Add(-1)
		return nil, false
	}
	return func() { s.unknown.Add(-1) }, true
}

// admitFrom admits a connection from addr unless MaxConnectionsPerAddress
// are open from it.
func (s *Server) admitFrom(addr netip.Addr) (func(), bool) {
	s.perAddressMu.Lock()
	defer s.perAddressMu.Unlock()
	if s.perAddress[addr] >= MaxConnectionsPerAddress {
		return nil, false
	}
	s.perAddress[addr]++
	return func() {
		s.perAddressMu.Lock()
		defer s.perAddressMu.Unlock()
		if s.perAddress[addr]--; s.perAddress[addr] <= 0 {
			delete(s.perAddress, addr)
		}
	}, true
}

// callerAddress is the address r came from.
func callerAddress(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Handler routes the worker API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sedna/workers/{worker}/info", s.postInfo)
	return mux
}

func (s *Server) postInfo(w http.ResponseWriter, r *http.Request) {
	worker := r.PathValue("worker")
	if strings.EqualFold(worker, edgeproto.LocalControllerWorker) {
		// The GlobalManager trusts reports under this name as the
		// LocalController's own (a round's data ready, a model deployed);
		// in any case, since a name differing only in case reads the same
		// to a person and may be compared without case somewhere.
		s.refuse(w, worker, http.StatusBadRequest, fmt.Sprintf("the worker name %q is reserved for the LocalController's own reports", worker))
		return
	}
	// Before the body is read: a caller that is not the worker costs no more.
	addr := callerAddress(r)
	wait, cancel := context.WithTimeout(r.Context(), s.addressWait)
	at := s.owners.WaitWorkerAt(wait, worker, addr)
	cancel()
	if !at {
		s.refuse(w, worker, http.StatusForbidden, notFromWorker(worker, addr))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, worker, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", s.maxBodyBytes))
			return
		}
		s.refuse(w, worker, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	slotWait := s.clock.NewTimer(s.inFlightWait)
	defer slotWait.Stop()
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	case <-slotWait.C():
		w.Header().Set("Retry-After", "1")
		s.refuse(w, worker, http.StatusServiceUnavailable, fmt.Sprintf("%d reports are being taken; try again", cap(s.inFlight)))
		return
	case <-r.Context().Done():
		return // the caller has gone
	}
	info, err := edgeproto.ParseWorkerBody(body)
	if err != nil {
		s.refuse(w, worker, http.StatusBadRequest, err.Error())
		return
	}
	if info.Name != worker {
		s.refuse(w, worker, http.StatusBadRequest, fmt.Sprintf("name %q in the body is not the worker %q of the URL", info.Name, worker))
		return
	}
	key, reason, err := s.ownerOf(info, worker, addr)
	switch {
	case err != nil:
		s.refuse(w, worker, http.StatusInternalServerError, "reading the local store: "+err.Error())
		return
	case reason != "":
		s.refuse(w, worker, http.StatusForbidden, reason)
		return
	}
	// The body goes up saying whom it is for, as the GlobalManager reads it.
	body, err = edgeproto.WithOwner(body, info, edgeproto.ObjectRef{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name})
	if err != nil {
		s.refuse(w, worker, http.StatusInternalServerError, "writing the owner into the report: "+err.Error())
		return
	}
	// The record is what the cloud link will send, byte for byte: a report
	// that could not go up in one frame is refused now, not dropped later.
	report, err := edgeproto.OutboxRecord(edgeproto.Report{Worker: worker, Body: body, ReceivedAt: s.clock.Now().UTC(), From: addr.String()})
	switch {
	case errors.Is(err, edgeproto.ErrTooLarge):
		s.refuse(w, worker, http.StatusRequestEntityTooLarge, "the report does not fit in a frame to the GlobalManager: "+err.Error())
		return
	case err != nil:
		s.refuse(w, worker, http.StatusInternalServerError, "encoding the report: "+err.Error())
		return
	}
	// A worker's share of the outbox is its pod's: by namespace and name.
	id, err := s.outbox.AppendWorkerReport(info.Namespace+"/"+worker, report)
	switch {
	case errors.Is(err, store.ErrOutboxFull):
		// The cloud has been away long enough to fill the buffer; the worker
		// retries later and nothing buffered is dropped.
		w.Header().Set("Retry-After", "30")
		s.refuse(w, worker, http.StatusServiceUnavailable, err.Error())
		return
	case errors.Is(err, store.ErrReportTooLarge):
		s.refuse(w, worker, http.StatusRequestEntityTooLarge, err.Error())
		return
	case err != nil:
		s.refuse(w, worker, http.StatusInternalServerError, "writing the report to disk: "+err.Error())
		return
	}
	s.logger.V(4).Info("Report buffered", "worker", worker, "id", id, "owner", key.String(), "kind", info.Kind, "status", info.Status)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id})
}

// notFromWorker is why a report is refused that names a worker not at the
// caller's address.
func notFromWorker(worker string, addr netip.Addr) string {
	return fmt.Sprintf("a report for worker %s is taken only from the address of its pod on this node, and %s is not it "+
		"(or this node has not heard of the pod or its address yet)", worker, addr)
}

// refuse answers with a status and a reason the worker's log will show, and
// logs it at the default level (Sedna's library logs a refusal only as a
// status code, then sends it again): at most refusalLogBurst at once and
// one a second after, any caller can make refusals; the next line logged
// says how many were not.
func (s *Server) refuse(w http.ResponseWriter, worker string, code int, reason string) {
	reason = edgeproto.Clip(reason, maxReasonBytes, "…")
	worker = edgeproto.ClipName(worker) // as logged
	if s.refusalLog.Allow() {
		s.logger.Info("Refused a worker report", "worker", worker, "code", code, "reason", reason,
			"notLoggedBefore", s.refusalsNotLogged.Swap(0))
	} else {
		s.refusalsNotLogged.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": reason})
}
