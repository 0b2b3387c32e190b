package edgeproto

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestParseWorkerInfoAcceptsWhatSednaWorkersSend(t *testing.T) {
	cases := map[string]struct {
		body string
		want WorkerInfo
	}{
		"training worker done, with results": {
			body: `{"name":"fl-train-0","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob",` +
				`"kind":"train","status":"completed","results":[{"format":"pb","url":"s3://m/1","metrics":{"acc":0.9}}]}`,
			want: WorkerInfo{Name: "fl-train-0", Namespace: "ns", OwnerName: "fl", OwnerKind: OwnerFederatedLearningJob,
				Kind: StageTrain, Status: WorkerCompleted,
				Results: []json.RawMessage{json.RawMessage(`{"format":"pb","url":"s3://m/1","metrics":{"acc":0.9}}`)}},
		},
		"results null, as a Python worker sends None": {
			body: `{"name":"il-eval","namespace":"ns","ownerName":"il","ownerKind":"incrementallearningjob","kind":"eval","status":"running","results":null}`,
			want: WorkerInfo{Name: "il-eval", Namespace: "ns", OwnerName: "il", OwnerKind: OwnerIncrementalLearningJob,
				Kind: StageEval, Status: WorkerRunning},
		},
		"joint inference edge worker: no status, ownerInfo, empty results": {
			body: `{"name":"ji-edge","namespace":"ns","ownerName":"ji","ownerKind":"jointinferenceservice","kind":"inference","results":[],` +
				`"ownerInfo":{"startTime":"2025-03-01 12:00:00","updateTime":"2025-03-01 12:00:30","inferenceNumber":10,"hardExampleNumber":2,"uploadCloudRatio":0.2}}`,
			want: WorkerInfo{Name: "ji-edge", Namespace: "ns", OwnerName: "ji", OwnerKind: OwnerJointInferenceService,
				Kind: StageInference, Results: []json.RawMessage{},
				OwnerInfo: json.RawMessage(`{"startTime":"2025-03-01 12:00:00","updateTime":"2025-03-01 12:00:30","inferenceNumber":10,"hardExampleNumber":2,"uploadCloudRatio":0.2}`)},
		},
		"inference with a status": {
			body: `{"name":"ll-infer","namespace":"ns","ownerName":"ll","ownerKind":"lifelonglearningjob","kind":"inference","status":"running"}`,
			want: WorkerInfo{Name: "ll-infer", Namespace: "ns", OwnerName: "ll", OwnerKind: OwnerLifelongLearningJob,
				Kind: StageInference, Status: WorkerRunning},
		},
		"deploy worker ready, ownerInfo null, unknown field": {
			body: `{"name":"il-deploy","namespace":"ns","ownerName":"il","ownerKind":"incrementallearningjob","kind":"deploy","status":"ready","ownerInfo":null,"extra":1}`,
			want: WorkerInfo{Name: "il-deploy", Namespace: "ns", OwnerName: "il", OwnerKind: OwnerIncrementalLearningJob,
				Kind: StageDeploy, Status: WorkerReady, OwnerInfo: json.RawMessage(`null`)},
		},
		"failed": {
			body: `{"name":"fl-agg","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"failed"}`,
			want: WorkerInfo{Name: "fl-agg", Namespace: "ns", OwnerName: "fl", OwnerKind: OwnerFederatedLearningJob,
				Kind: StageTrain, Status: WorkerFailed},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseWorkerInfo([]byte(tc.body))
			if err != nil {
				t.Fatalf("ParseWorkerInfo: %v", err)
			}
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("ParseWorkerInfo (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseWorkerInfoNamesEveryBadField(t *testing.T) {
	const valid = `"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"running"`
	cases := map[string]struct {
		body     string
		wantErrs []string
	}{
		"not JSON":              {`{"name":`, []string{"body is not valid JSON"}},
		"not an object":         {`["name"]`, []string{"body is not a JSON object"}},
		"null":                  {`null`, []string{"body is not a JSON object"}},
		"invalid UTF-8":         {"{\"name\":\"\xff\"}", []string{"body is not valid UTF-8"}},
		"field of another type": {`{"name":1}`, []string{"name: cannot use a JSON number here"}},
		"empty object": {`{}`, []string{"name is required", "namespace is required", "ownerName is required",
			"ownerKind is required", "kind is required", "status is required (only inference reports may omit it)"}},
		"unknown ownerKind": {`{"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"FederatedLearningJob","kind":"train","status":"running"}`,
			[]string{`ownerKind "FederatedLearningJob" is not one of federatedlearningjob, jointinferenceservice, incrementallearningjob, lifelonglearningjob`}},
		"unknown stage": {`{"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"predict","status":"running"}`,
			[]string{`kind "predict" is not one of train, eval, deploy, inference`}},
		"unknown status": {`{"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"done"}`,
			[]string{`status "done" is not one of ready, running, completed, failed`}},
		"training without status": {`{"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train"}`,
			[]string{"status is required (only inference reports may omit it)"}},
		"ownerInfo not an object": {`{` + valid + `,"ownerInfo":[1]}`, []string{"ownerInfo is not a JSON object"}},
		"ownerInfo a string":      {`{` + valid + `,"ownerInfo":"x"}`, []string{"ownerInfo is not a JSON object"}},
		"a result not an object":  {`{` + valid + `,"results":[{},"s3://m",null]}`, []string{"results[1] is not a JSON object", "results[2] is not a JSON object"}},
		"results not a list":      {`{` + valid + `,"results":{}}`, []string{"results: cannot use a JSON object here"}},
		// A 256 KiB body of bad results is refused in a few lines, not a
		// line each: the answer and its allocations stay small.
		"many bad results": {`{` + valid + `,"results":[` + strings.Repeat("1,", 999) + `1]}`, append(func() (l []string) {
			for i := range maxProblems {
				l = append(l, fmt.Sprintf("results[%d] is not a JSON object", i))
			}
			return l
		}(), "and 990 more problems")},
		"too many results": {`{` + valid + `,"results":[` + strings.Repeat("{},", MaxResults) + `{}]}`,
			[]string{fmt.Sprintf("results has %d entries, at most %d", MaxResults+1, MaxResults)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWorkerInfo([]byte(tc.body))
			if err == nil {
				t.Fatalf("ParseWorkerInfo accepted %s: %+v", tc.body, w)
			}
			got := strings.Split(err.Error(), "\n")
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOwnerKindsNameTheAPIKinds(t *testing.T) {
	cases := map[OwnerKind]string{
		OwnerFederatedLearningJob:   sednav1.FederatedLearningJobKind.Kind,
		OwnerJointInferenceService:  sednav1.JointInferenceServiceKind.Kind,
		OwnerIncrementalLearningJob: sednav1.IncrementalLearningJobKind.Kind,
		OwnerLifelongLearningJob:    sednav1.LifelongLearningJobKind.Kind,
		"dataset":                   "",
	}
	for kind, want := range cases {
		if got := kind.APIKind(); got != want {
			t.Errorf("OwnerKind(%q).APIKind() = %q, want %q", kind, got, want)
		}
		if got := strings.ToLower(want); want != "" && got != string(kind) {
			t.Errorf("OwnerKind %q is not the lower-case kind %q", kind, got)
		}
	}
	w := WorkerInfo{Namespace: "ns", OwnerName: "ji", OwnerKind: OwnerJointInferenceService}
	if diff := cmp.Diff(ObjectRef{Kind: "JointInferenceService", Namespace: "ns", Name: "ji"}, w.Owner()); diff != "" {
		t.Errorf("Owner() (-want,+got):\n%s", diff)
	}
}
