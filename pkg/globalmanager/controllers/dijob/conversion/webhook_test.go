package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/internal/serving"
	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

func reviewOf(t *testing.T, desired string, objs ...any) []byte {
	t.Helper()
	req := &conversionRequest{UID: "uid-1", DesiredAPIVersion: desired}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(conversionReview{TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: "ConversionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func post(t *testing.T, body []byte) (*httptest.ResponseRecorder, *conversionResponse) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	var review conversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		t.Fatal(err)
	}
	if review.Response == nil || review.Response.UID != "uid-1" {
		t.Fatalf("answer without the request's uid: %s", rec.Body.String())
	}
	return rec, review.Response
}

func TestWebhookConvertsEachObject(t *testing.T) {
	v1 := &div1.DIJob{TypeMeta: v1Meta, ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: div1.DIJobSpec{Coordinator: &div1.CoordinatorSpec{Template: template("c")}}}
	v2 := v2Job()
	_, resp := post(t, reviewOf(t, "diengine.opendilab.org/v2alpha1", v1, v2))
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 {
		t.Fatalf("result %+v with %d objects, want success with 2", resp.Result, len(resp.ConvertedObjects))
	}
	want, _ := ToV2(v1)
	var got div2.DIJob
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("the v1 job converted (-want,+got):\n%s", diff)
	}
	if raw, _ := json.Marshal(v2); !bytes.Equal(resp.ConvertedObjects[1].Raw, raw) {
		t.Errorf("an object already in the desired version changed:\n%s\nwant\n%s", resp.ConvertedObjects[1].Raw, raw)
	}
}

func TestWebhookRefuses(t *testing.T) {
	other := map[string]any{"apiVersion": "diengine.opendilab.org/v1alpha1", "kind": "AggregatorConfig"}
	cases := map[string]struct {
		body       []byte
		wantStatus int
		wantFailed string
	}{
		"another kind":      {body: reviewOf(t, "diengine.opendilab.org/v2alpha1", other), wantStatus: http.StatusOK, wantFailed: "only DIJobs convert"},
		"another version":   {body: reviewOf(t, "diengine.opendilab.org/v3", v2Job()), wantStatus: http.StatusOK, wantFailed: "no conversion from"},
		"not a review":      {body: []byte(`{"apiVersion":"v1","kind":"Pod"}`), wantStatus: http.StatusBadRequest},
		"not JSON":          {body: []byte(`{`), wantStatus: http.StatusBadRequest},
		"over MaxBodyBytes": {body: append([]byte(`{"x":"`), bytes.Repeat([]byte("x"), int(MaxBodyBytes))...), wantStatus: http.StatusRequestEntityTooLarge},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, resp := post(t, tc.body)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body.String(), tc.wantStatus)
			}
			if tc.wantFailed == "" {
				return
			}
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tc.wantFailed) || resp.ConvertedObjects != nil {
				t.Errorf("result %+v, objects %d: want a failure saying %q and no objects", resp.Result, len(resp.ConvertedObjects), tc.wantFailed)
			}
		})
	}
}

// fakeCRD is a CRD in memory that applies merge patches of clientConfig.
type fakeCRD struct {
	strategy string
	config   map[string]any
	patches  int
}

func (f *fakeCRD) Get(context.Context) ([]byte, error) {
	return json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"strategy": f.strategy, "webhook": map[string]any{"clientConfig": f.config}}}})
}

func (f *fakeCRD) Patch(_ context.Context, patch []byte) error {
	f.patches++
	var p struct {
		Spec struct {
			Conversion struct {
				Webhook struct {
					ClientConfig map[string]any `json:"clientConfig"`
				} `json:"webhook"`
			} `json:"conversion"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	for k, v := range p.Spec.Conversion.Webhook.ClientConfig {
		if v == nil {
			delete(f.config, k)
		} else {
			f.config[k] = v
		}
	}
	return nil
}

func TestEnsurePointsTheCRDAtTheWebhook(t *testing.T) {
	generated := func() map[string]any {
		return map[string]any{"service": map[string]any{"namespace": "nereid-system", "name": "nereid-dijob-conversion", "path": "/convert", "port": 443}}
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	cases := map[string]struct {
		crd         *fakeCRD
		want        ClientConfig
		wantPatched bool
		wantErr     error
		wantConfig  map[string]any
	}{
		"a loopback URL replaces the Service": {
			crd: &fakeCRD{strategy: "Webhook", config: generated()}, want: ClientConfig{URL: "https://127.0.0.1:9443/convert", CABundle: ca}, wantPatched: true,
			wantConfig: map[string]any{"url": "https://127.0.0.1:9443/convert", "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
		},
		"a Service of another release, with its CA": {
			crd: &fakeCRD{strategy: "Webhook", config: generated()}, want: ClientConfig{Service: &ServiceReference{Namespace: "ml", Name: "r-dijob-conversion", Port: 443}, CABundle: ca}, wantPatched: true,
			wantConfig: map[string]any{"service": map[string]any{"namespace": "ml", "name": "r-dijob-conversion", "path": "/convert", "port": float64(443)}, "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
		},
		"already so": {
			crd:        &fakeCRD{strategy: "Webhook", config: map[string]any{"url": "https://127.0.0.1:9443/convert", "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}},
			want:       ClientConfig{URL: "https://127.0.0.1:9443/convert", CABundle: ca},
			wantConfig: map[string]any{"url": "https://127.0.0.1:9443/convert", "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
		},
		"a CRD without a conversion webhook is left alone": {
			crd: &fakeCRD{strategy: "None", config: map[string]any{}}, want: ClientConfig{URL: "https://127.0.0.1:9443/convert"}, wantErr: ErrNoWebhook,
			wantConfig: map[string]any{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			patched, err := Ensure(t.Context(), tc.crd, tc.want)
			if err != tc.wantErr || patched != tc.wantPatched {
				t.Fatalf("Ensure = %v, %v; want %v, %v", patched, err, tc.wantPatched, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantConfig, tc.crd.config); diff != "" {
				t.Errorf("clientConfig (-want,+got):\n%s", diff)
			}
			if patched, err := Ensure(t.Context(), tc.crd, tc.want); patched || err != tc.wantErr {
				t.Errorf("a second Ensure = %v, %v; want no patch", patched, err)
			}
		})
	}
}

// TestWebhookKeepsAV2JobAsWritten: a v2 job, as a v2 client wrote it (no
// "metadata": {} in its templates, no "resources": {} in its containers),
// read in v1alpha1 and written back, is the same JSON, every task's
// template included; so is a v1 job read back.
func TestWebhookKeepsAV2JobAsWritten(t *testing.T) {
	cases := map[string]struct{ in, via string }{
		"a v2 job through v1alpha1": {via: "diengine.opendilab.org/v1alpha1", in: `{"apiVersion":"diengine.opendilab.org/v2alpha1","kind":"DIJob",
			"metadata":{"name":"j","namespace":"ns","annotations":{"a":"b"}},
			"spec":{"priority":"normal","cleanPodPolicy":"Running","backoffLimit":3,
				"volumes":[{"name":"cache","emptyDir":{"medium":"Memory","sizeLimit":"128Mi"}}],
				"tasks":[
					{"type":"evaluator","replicas":1,"template":{"spec":{"containers":[{"name":"e","image":"i"}]}}},
					{"type":"collector","replicas":2,"template":{"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":22270}]}]}}},
					{"type":"none","name":"extra","replicas":1,"template":{"spec":{"containers":[{"name":"x","image":"i"}]}}},
					{"type":"learner","replicas":1,"template":{"spec":{"containers":[{"name":"l","image":"i"}]}}}]}}`},
		"a v1 job through v2alpha1": {via: "diengine.opendilab.org/v2alpha1", in: `{"apiVersion":"diengine.opendilab.org/v1alpha1","kind":"DIJob",
			"metadata":{"name":"j","namespace":"ns"},
			"spec":{"group":"xxx","priorityClassName":"","cleanPodPolicy":"Running",
				"coordinator":{"template":{"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":3}}}]}}},
				"learner":{"template":{"spec":{"containers":[{"name":"l","image":"i"}]}}}}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.in), &want); err != nil {
				t.Fatal(err)
			}
			there, err := Convert([]byte(tc.in), tc.via)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Convert(there, want["apiVersion"].(string))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(back, &got); err != nil {
				t.Fatal(err)
			}
			// What the Go types cannot tell apart: "" left out, and a
			// number the API server stores as it was written.
			if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k string, v any) bool { return v == "" })); diff != "" {
				t.Errorf("back (-written,+got):\n%s", diff)
			}
		})
	}
}

// The webhook reads a body only once it has declared its size and that size
// has room among the bodies being read (serving.Budget tests the waiting).
func TestWebhookReadsOnlyDeclaredBodiesWithinTheBudget(t *testing.T) {
	body := reviewOf(t, "diengine.opendilab.org/v2alpha1", v2Job())
	unsized := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body))
	unsized.ContentLength = -1
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, unsized)
	if rec.Code != http.StatusLengthRequired {
		t.Errorf("a review without a Content-Length: %d, want 411", rec.Code)
	}

	full := serving.NewBudget(int64(len(body)) - 1)
	rec = httptest.NewRecorder()
	handler(full, time.Millisecond).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a review with no room in the budget: %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
}
