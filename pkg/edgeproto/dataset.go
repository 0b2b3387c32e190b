package edgeproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ReportKind says what a Report's Body holds.
type ReportKind string

// The kinds of report.
const (
	// ReportWorker is a worker's WorkerInfo, as the worker posted it (the
	// LocalController's own cycle reports take this shape too, under the
	// worker name LocalControllerWorker).
	ReportWorker ReportKind = ""
	// ReportDataset is a DatasetReport: the LocalController's count of a
	// Dataset's samples on its node.
	ReportDataset ReportKind = "dataset"
)

// LocalControllerWorker is the worker name under which a LocalController
// reports what it does itself in a learning cycle (the train trigger fired
// and the round's data is ready; the deploy stage copied the new model). The
// worker API refuses it from workers, so a report under it comes from the
// LocalController.
const LocalControllerWorker = "nereid-localcontroller"

// DatasetReport is the LocalController's count of one Dataset on its node.
type DatasetReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// NumberOfSamples is the count; it is meaningless when Error is set (the
	// GlobalManager then keeps the last count it had).
	NumberOfSamples int32 `json:"numberOfSamples"`
	// CountedAt is when the LocalController counted.
	CountedAt time.Time `json:"countedAt"`
	// Error says why the index file could not be read; empty when it was.
	Error string `json:"error,omitempty"`
}

// ParseDatasetReport decodes a dataset report's body and validates it.
func ParseDatasetReport(body []byte) (*DatasetReport, error) {
	if err := checkObject("body", body); err != nil {
		return nil, err
	}
	var d DatasetReport
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, errors.New(describeJSONError(err))
	}
	var errs []error
	if d.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if d.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if d.NumberOfSamples < 0 {
		errs = append(errs, fmt.Errorf("numberOfSamples %d is negative", d.NumberOfSamples))
	}
	if d.CountedAt.IsZero() {
		errs = append(errs, errors.New("countedAt is required"))
	}
	return &d, errors.Join(errs...)
}

// Ref is the Dataset the report is about.
func (d *DatasetReport) Ref() ObjectRef {
	return ObjectRef{Kind: "Dataset", Namespace: d.Namespace, Name: d.Name}
}
