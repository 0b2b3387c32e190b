// Package commontest holds the fakes the tests of the controller plumbing
// and of writing edge reports into status share.
package commontest

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// Job is a FederatedLearningJob ns/job, of generation 1.
func Job() *sednav1.FederatedLearningJob {
	return &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid", Generation: 1}}
}

// StatusServer is the API server's side of one job, a status client (the
// plumbing's StatusClient) whose status writes fail with WriteErr, or with a
// conflict the first Conflicts times (someone else wrote meanwhile, which
// the next read sees: status.active goes up by one).
type StatusServer struct {
	Job       *sednav1.FederatedLearningJob
	WriteErr  error
	Conflicts int
	Recorder  *record.FakeRecorder
	// Writes are the statuses written; EventsAtWrite how many events had
	// been recorded at each attempt to write.
	Writes        []sednav1.FederatedLearningJobStatus
	EventsAtWrite []int
	// Deletes are the delete options of each delete of the job.
	Deletes []metav1.DeleteOptions
}

// NewStatusServer serves job, with a recorder of 10 events.
func NewStatusServer(job *sednav1.FederatedLearningJob) *StatusServer {
	return &StatusServer{Job: job.DeepCopy(), Recorder: record.NewFakeRecorder(10)}
}

// Get reads the job, if it is the one named.
func (s *StatusServer) Get(_ context.Context, name string, _ metav1.GetOptions) (*sednav1.FederatedLearningJob, error) {
	if s.Job == nil || s.Job.Name != name {
		return nil, apierrors.NewNotFound(sednav1.Resource("federatedlearningjobs"), name)
	}
	return s.Job.DeepCopy(), nil
}

// Delete deletes the job when its precondition, if any, holds.
func (s *StatusServer) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	s.Deletes = append(s.Deletes, opts)
	if s.Job == nil || s.Job.Name != name {
		return apierrors.NewNotFound(sednav1.Resource("federatedlearningjobs"), name)
	}
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != s.Job.UID {
		return apierrors.NewConflict(sednav1.Resource("federatedlearningjobs"), name, errors.New("the UID in the precondition does not match"))
	}
	s.Job = nil
	return nil
}

// UpdateStatus writes j's status, or fails as the server is told to.
func (s *StatusServer) UpdateStatus(_ context.Context, j *sednav1.FederatedLearningJob, _ metav1.UpdateOptions) (*sednav1.FederatedLearningJob, error) {
	s.EventsAtWrite = append(s.EventsAtWrite, len(s.Recorder.Events))
	switch {
	case s.WriteErr != nil:
		return nil, s.WriteErr
	case s.Conflicts > 0:
		s.Conflicts--
		s.Job.Status.Active++
		return nil, apierrors.NewConflict(sednav1.Resource("federatedlearningjobs"), j.Name, errors.New("the object has been modified"))
	}
	s.Writes = append(s.Writes, j.Status)
	s.Job = j.DeepCopy()
	return j, nil
}
