package conversion

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/serving"
	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// Path is where the webhook answers ConversionReviews, as the CRD's
// clientConfig names it.
const Path = "/convert"

// MaxBodyBytes bounds a ConversionReview's body: the API server sends the
// objects of a list in one review, and kubectl lists in pages of 500, so 64
// MiB holds a page of DIJobs of 128 KiB each; a larger body is refused with
// 413 and that read fails.
const MaxBodyBytes int64 = 64 << 20

// MaxBodiesInFlight bounds the bytes of the bodies read at once, whoever
// sends them (any pod that reaches the port can): one review of the largest
// size, or many small ones (a DIJob is a few KiB). A review waits up to
// bodyWait for room, then is answered 503; the API server retries a read.
const (
	MaxBodiesInFlight int64 = MaxBodyBytes
	bodyWait                = 10 * time.Second
)

// limits bound the webhook's clients (the API server, and whoever else
// reaches the port).
var limits = serving.Limits{
	ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
	IdleTimeout: 90 * time.Second, MaxHeaderBytes: 32 << 10, MaxConnections: 256,
}

// The ConversionReview of apiextensions.k8s.io/v1, as far as the webhook
// reads and writes it (the module that defines it is not one of Nereid's).
const reviewAPIVersion = "apiextensions.k8s.io/v1"

type conversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conversionRequest  `json:"request,omitempty"`
	Response        *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               types.UID              `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

type conversionResponse struct {
	UID              types.UID              `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// Handler answers ConversionReviews (v1) of DIJobs on Path, holding at
// most MaxBodiesInFlight bytes of bodies at once.
func Handler() http.Handler {
	return handler(serving.NewBudget(MaxBodiesInFlight), bodyWait)
}

func handler(budget *serving.Budget, wait time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+Path, budget.Bodies(MaxBodyBytes, wait, http.HandlerFunc(serveReview)))
	return mux
}

func serveReview(w http.ResponseWriter, r *http.Request) {
	var review conversionReview
	dec := json.NewDecoder(r.Body) // cut at MaxBodyBytes by handler
	if err := dec.Decode(&review); err != nil {
		status := http.StatusBadRequest
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "reading the ConversionReview: "+err.Error(), status)
		return
	}
	if review.APIVersion != reviewAPIVersion || review.Kind != "ConversionReview" || review.Request == nil {
		http.Error(w, fmt.Sprintf("want a ConversionReview %s with a request, not %s %s", reviewAPIVersion, review.APIVersion, review.Kind), http.StatusBadRequest)
		return
	}
	resp := &conversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, obj := range review.Request.Objects {
		out, err := Convert(obj.Raw, review.Request.DesiredAPIVersion)
		if err != nil {
			klog.FromContext(r.Context()).V(2).Info("Refused a conversion", "err", err)
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(conversionReview{TypeMeta: review.TypeMeta, Response: resp})
}

// Convert converts a DIJob, JSON, to apiVersion.
func Convert(raw []byte, apiVersion string) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("reading the object: %w", err)
	}
	if tm.Kind != div2.DIJobKind.Kind {
		return nil, fmt.Errorf("kind %q: only DIJobs convert", tm.Kind)
	}
	v1, v2 := div1.SchemeGroupVersion.String(), div2.SchemeGroupVersion.String()
	switch {
	case tm.APIVersion == apiVersion:
		return raw, nil
	case tm.APIVersion == v1 && apiVersion == v2:
		return convertJSON(raw, ToV2, func(j *div2.DIJob) any { return j.Status })
	case tm.APIVersion == v2 && apiVersion == v1:
		return convertJSON(raw, ToV1, func(j *div1.DIJob) any { return j.Status })
	}
	return nil, fmt.Errorf("no conversion from %s to %s", tm.APIVersion, apiVersion)
}

// convertJSON decodes raw as an In, converts it with convert and encodes
// the Out, its templates, volumes and absent status as raw had them.
func convertJSON[In, Out any](raw []byte, convert func(*In) (*Out, error), status func(*Out) any) ([]byte, error) {
	in := new(In)
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, fmt.Errorf("reading the DIJob: %w", err)
	}
	out, err := convert(in)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return keepAsWritten(raw, b, reflect.ValueOf(status(out)).IsZero())
}

// Serve serves Handler over TLS on ln until ctx ends, within bounds of
// time, header size and connections.
func Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := limits.Server(Handler())
	srv.ErrorLog = klog.NewStandardLogger("WARNING")
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	srv.TLSConfig = tlsConfig.Clone()
	klog.FromContext(ctx).Info("Serving the DIJob conversion webhook", "address", ln.Addr().String(), "path", Path)
	if err := serving.Run(ctx, srv, limits.Listener(ln), 10*time.Second); err != nil {
		return fmt.Errorf("serving the DIJob conversion webhook: %w", err)
	}
	return nil
}
