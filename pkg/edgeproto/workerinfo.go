package edgeproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// OwnerKind is the lower-case kind of the job or service a worker belongs to,
// as Sedna's workers send it in ownerKind.
type OwnerKind string

// The owner kinds Sedna's workers send.
const (
	OwnerFederatedLearningJob   OwnerKind = "federatedlearningjob"
	OwnerJointInferenceService  OwnerKind = "jointinferenceservice"
	OwnerIncrementalLearningJob OwnerKind = "incrementallearningjob"
	OwnerLifelongLearningJob    OwnerKind = "lifelonglearningjob"
)

var ownerKinds = []OwnerKind{OwnerFederatedLearningJob, OwnerJointInferenceService,
	OwnerIncrementalLearningJob, OwnerLifelongLearningJob}

// OwnerKindOf is the owner kind of the sedna.io kind apiKind
// (federatedlearningjob for FederatedLearningJob), or "" for a kind whose
// workers do not report.
func OwnerKindOf(apiKind string) OwnerKind {
	for _, k := range ownerKinds {
		if k.APIKind() == apiKind {
			return k
		}
	}
	return ""
}

// APIKind is the sedna.io kind of the owner (FederatedLearningJob for
// federatedlearningjob), or "" for an unknown owner kind.
func (k OwnerKind) APIKind() string {
	switch k {
	case OwnerFederatedLearningJob:
		return "FederatedLearningJob"
	case OwnerJointInferenceService:
		return "JointInferenceService"
	case OwnerIncrementalLearningJob:
		return "IncrementalLearningJob"
	case OwnerLifelongLearningJob:
		return "LifelongLearningJob"
	}
	return ""
}

// Stage is what a worker is doing, sent as the report's kind.
type Stage string

// The stages Sedna's workers send.
const (
	StageTrain     Stage = "train"
	StageEval      Stage = "eval"
	StageDeploy    Stage = "deploy"
	StageInference Stage = "inference"
)

var stages = []Stage{StageTrain, StageEval, StageDeploy, StageInference}

// WorkerStatus is a worker's status in its report.
type WorkerStatus string

// The statuses Sedna's workers send.
const (
	WorkerReady     WorkerStatus = "ready"
	WorkerRunning   WorkerStatus = "running"
	WorkerCompleted WorkerStatus = "completed"
	WorkerFailed    WorkerStatus = "failed"
)

var workerStatuses = []WorkerStatus{WorkerReady, WorkerRunning, WorkerCompleted, WorkerFailed}

// WorkerInfo is the body Sedna's workers POST to the LC's worker API
// (/sedna/workers/{worker-name}/info), carried unchanged to the GM as a
// Report's Body. Unknown fields are ignored.
type WorkerInfo struct {
	// Name is the worker's name.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// OwnerName is the name of the job or service the worker belongs to.
	OwnerName string    `json:"ownerName"`
	OwnerKind OwnerKind `json:"ownerKind"`
	// OwnerInfo is kind-specific (for a joint inference edge worker: startTime,
	// updateTime, inferenceNumber, hardExampleNumber, uploadCloudRatio), kept
	// raw so each kind decodes it into its own type with numbers intact. It is
	// absent, null or a JSON object.
	OwnerInfo json.RawMessage `json:"ownerInfo,omitempty"`
	// Kind is the stage.
	Kind Stage `json:"kind"`
	// Status is empty only in inference reports: Sedna's joint inference
	// workers send none.
	Status WorkerStatus `json:"status,omitempty"`
	// Results are the worker's outputs when done (models with their URLs and
	// metrics, for instance), each a JSON object, kept raw like OwnerInfo.
	Results []json.RawMessage `json:"results,omitempty"`
}

// ParseWorkerInfo decodes a worker's body and validates it. The GM calls it
// on a Report's Body and refuses the report on an error.
func ParseWorkerInfo(body []byte) (*WorkerInfo, error) { return parseWorkerInfo(body, true) }

// ParseWorkerBody decodes a worker's body and validates all of it but whom
// it is for (namespace, ownerName, ownerKind). The LC calls it before it
// accepts a report: it takes the owner from the worker's pod, not from the
// body, for Sedna's own workers do not always say it (a federated trainer
// sends ownerKind "default", a joint inference worker ownerName "sedna"),
// and then writes the pod's owner into the body (WithOwner).
func ParseWorkerBody(body []byte) (*WorkerInfo, error) { return parseWorkerInfo(body, false) }

// parseWorkerInfo decodes body and validates it, its owner when owner is set.
func parseWorkerInfo(body []byte, owner bool) (*WorkerInfo, error) {
	if !json.Valid(body) {
		return nil, errors.New("body is not valid JSON")
	}
	if !utf8.Valid(body) {
		return nil, errors.New("body is not valid UTF-8")
	}
	if !isObject(body) {
		return nil, errors.New("body is not a JSON object")
	}
	var w WorkerInfo
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, errors.New(describeJSONError(err))
	}
	if err := w.validate(owner); err != nil {
		return nil, err
	}
	return &w, nil
}

// Validate checks the fields the GM needs to apply a report, and that the
// enumerations hold values Sedna's workers send. It returns every problem
// found, each naming its field.
func (w *WorkerInfo) Validate() error { return w.validate(true) }

// validate is Validate, of the owner's fields too when owner is set.
func (w *WorkerInfo) validate(owner bool) error {
	var errs []error
	required := func(field, value string) {
		if value == "" {
			errs = append(errs, fmt.Errorf("%s is required", field))
		}
	}
	required("name", w.Name)
	if owner {
		required("namespace", w.Namespace)
		required("ownerName", w.OwnerName)
		if err := oneOf("ownerKind", w.OwnerKind, ownerKinds); err != nil {
			errs = append(errs, err)
		}
	}
	if err := oneOf("kind", w.Kind, stages); err != nil {
		errs = append(errs, err)
	}
	switch {
	case w.Status == "" && w.Kind == StageInference:
	case w.Status == "":
		errs = append(errs, errors.New("status is required (only inference reports may omit it)"))
	default:
		if err := oneOf("status", w.Status, workerStatuses); err != nil {
			errs = append(errs, err)
		}
	}

	if len(w.OwnerInfo) > 0 && string(w.OwnerInfo) != "null" {
		if err := checkObject("ownerInfo", w.OwnerInfo); err != nil {
			errs = append(errs, err)
		}
	}
	if len(w.Results) > MaxResults {
		errs = append(errs, fmt.Errorf("results has %d entries, at most %d", len(w.Results), MaxResults))
	} else {
		for i, r := range w.Results {
			if err := checkObject(fmt.Sprintf("results[%d]", i), r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > maxProblems {
		errs = append(errs[:maxProblems], fmt.Errorf("and %d more problems", len(errs)-maxProblems))
	}
	return errors.Join(errs...)
}

// MaxResults bounds a report's results: Sedna's workers send a model or a
// few (one a task of a lifelong learning round).
const MaxResults = 1024

// maxProblems bounds the problems Validate names: a report of a thousand
// bad results is refused with ten of them, not a thousand lines.
const maxProblems = 10

// Owner is the ref of the job or service the worker belongs to, or a ref with
// an empty Kind when OwnerKind is unknown.
func (w *WorkerInfo) Owner() ObjectRef {
	return ObjectRef{Kind: w.OwnerKind.APIKind(), Namespace: w.Namespace, Name: w.OwnerName}
}

// WithOwner is body, a worker's report that ParseWorkerBody took, saying
// that it is for owner: its namespace, ownerName and ownerKind set to
// owner's, the rest as it was. A body that says so already is returned as
// it is, byte for byte.
func WithOwner(body []byte, info *WorkerInfo, owner ObjectRef) ([]byte, error) {
	kind := OwnerKindOf(owner.Kind)
	if kind == "" {
		return nil, fmt.Errorf("%s is not a kind whose workers report", owner.Kind)
	}
	if info.Namespace == owner.Namespace && info.OwnerName == owner.Name && info.OwnerKind == kind {
		return body, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	set := map[string]string{"namespace": owner.Namespace, "ownerName": owner.Name, "ownerKind": string(kind)}
	// encoding/json matches field names without case: a "ownerkind" left
	// beside the "ownerKind" set here could be the one a reader takes.
	for name := range fields {
		for field := range set {
			if strings.EqualFold(name, field) {
				delete(fields, name)
			}
		}
	}
	for name, value := range set {
		raw, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		fields[name] = raw
	}
	info.Namespace, info.OwnerName, info.OwnerKind = owner.Namespace, owner.Name, kind
	return json.Marshal(fields)
}

// oneOf checks that a required enumeration field holds one of allowed.
func oneOf[T ~string](field string, value T, allowed []T) error {
	if value == "" {
		return fmt.Errorf("%s is required", field)
	}
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%s %q is not one of %s", field, clip(string(value)), strings.Join(names, ", "))
}

// WorkerReport is a worker's Report with its Body parsed, as the GM hands it
// to the applier of the report's kind.
type WorkerReport struct {
	Report *Report
	Info   *WorkerInfo
}
