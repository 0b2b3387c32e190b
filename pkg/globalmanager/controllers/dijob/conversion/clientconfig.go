package conversion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// CRDName is the CRD whose conversion webhook this is: the only one the
// GlobalManager patches (its RBAC names it).
const CRDName = "dijobs.diengine.opendilab.org"

// RecheckPeriod is how often the CRD's clientConfig is read again, so that
// a CRD applied again (helm upgrade, kubectl apply -f build/crds/) points
// at this webhook again within it.
const RecheckPeriod = time.Minute

// ClientConfig is where the API server reaches the webhook and the CA it
// verifies it with: a Service (in a cluster) or a URL (the local run).
type ClientConfig struct {
	Service  *ServiceReference
	URL      string
	CABundle []byte
}

// ServiceReference is the webhook's Service.
type ServiceReference struct {
	Namespace, Name string
	Port            int32
}

// clientConfigJSON is the CRD's spec.conversion.webhook.clientConfig.
type clientConfigJSON struct {
	URL      *string      `json:"url"`
	Service  *serviceJSON `json:"service"`
	CABundle []byte       `json:"caBundle,omitempty"`
}

type serviceJSON struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Path      *string `json:"path,omitempty"`
	Port      *int32  `json:"port,omitempty"`
}

func (c ClientConfig) json() clientConfigJSON {
	out := clientConfigJSON{CABundle: c.CABundle}
	if s := c.Service; s != nil {
		out.Service = &serviceJSON{Namespace: s.Namespace, Name: s.Name, Path: ptr.To(Path), Port: ptr.To(s.Port)}
	} else {
		out.URL = ptr.To(c.URL)
	}
	return out
}

// CRD reads and patches the DIJob CRD.
type CRD interface {
	Get(ctx context.Context) ([]byte, error)
	Patch(ctx context.Context, mergePatch []byte) error
}

// RESTCRD is the CRD through a REST client of the API server (the
// apiextensions clientset is not one of Nereid's modules).
type RESTCRD struct{ Client rest.Interface }

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + CRDName

// Get reads the CRD, as JSON (the GlobalManager's clients ask for
// protobuf by default).
func (c RESTCRD) Get(ctx context.Context) ([]byte, error) {
	return c.Client.Get().AbsPath(crdPath).SetHeader("Accept", "application/json").DoRaw(ctx)
}

// Patch applies a JSON merge patch to the CRD.
func (c RESTCRD) Patch(ctx context.Context, mergePatch []byte) error {
	return c.Client.Patch(types.MergePatchType).AbsPath(crdPath).Body(mergePatch).Do(ctx).Error()
}

// ErrNoWebhook says the CRD converts by no webhook (an earlier Nereid's,
// serving v2alpha1 alone): it is left as it is.
var ErrNoWebhook = errors.New("the DIJob CRD has no conversion webhook (spec.conversion.strategy is not Webhook); v1alpha1 is not served")

// Ensure makes the CRD's clientConfig want, patching that alone, and says
// whether it patched.
func Ensure(ctx context.Context, crd CRD, want ClientConfig) (bool, error) {
	raw, err := crd.Get(ctx)
	if err != nil {
		return false, fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	var got struct {
		Spec struct {
			Conversion struct {
				Strategy string `json:"strategy"`
				Webhook  struct {
					ClientConfig clientConfigJSON `json:"clientConfig"`
				} `json:"webhook"`
			} `json:"conversion"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		return false, fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	if got.Spec.Conversion.Strategy != "Webhook" {
		return false, ErrNoWebhook
	}
	w := want.json()
	if reflect.DeepEqual(got.Spec.Conversion.Webhook.ClientConfig, w) {
		return false, nil
	}
	// url and service both written (one null) so that a merge patch
	// switches from one to the other.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": w}}}})
	if err != nil {
		return false, err
	}
	if err := crd.Patch(ctx, patch); err != nil {
		return false, fmt.Errorf("patching the conversion webhook of CRD %s: %w", CRDName, err)
	}
	return true, nil
}

// Keep ensures want on the CRD now and every RecheckPeriod until ctx ends,
// logging what it cannot do; it returns when ctx ends.
func Keep(ctx context.Context, crd CRD, want ClientConfig, clk clock.WithTicker) {
	logger := klog.FromContext(ctx)
	t := clk.NewTicker(RecheckPeriod)
	defer t.Stop()
	var lastErr string
	for {
		patched, err := Ensure(ctx, crd, want)
		switch {
		case err != nil && err.Error() != lastErr:
			logger.Error(err, "Cannot point the DIJob CRD at its conversion webhook; v1alpha1 DIJobs do not convert until it can")
		case patched:
			logger.Info("Pointed the DIJob CRD at its conversion webhook", "crd", CRDName, "url", want.URL, "service", want.Service)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
