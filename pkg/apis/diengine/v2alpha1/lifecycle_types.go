package v2alpha1

// JobLifecycle is what every Kubernetes job has and DI-orchestrator's DIJob
// did not: it can be suspended, given a deadline, cleaned up after it
// finishes and handed to another controller. Nereid's own, as a Kubernetes
// Job's and a JobSet's fields of the same names; absent, the job runs as
// DI-orchestrator's does. The fields are the same in v1alpha1 and
// v2alpha1, and convert one to one.
type JobLifecycle struct {
	// True stops the job's pods (its status and restart counts are kept,
	// and it holds no quota); false or absent runs them again. A job
	// created suspended makes nothing until resumed. The Suspended
	// condition says since when.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// The controller that runs this job: absent or nereid.io/globalmanager
	// for Nereid's GlobalManager; any other value leaves it wholly to that
	// controller (no pods, no status writes), as MultiKueue runs a job in a
	// worker cluster. It cannot be changed once set.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// Seconds the job may be active before it fails with reason
	// DeadlineExceeded (its pods then go as for any failure). Time
	// suspended is not counted: the clock starts again when a suspended
	// job resumes, as a Kubernetes Job's does.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// Seconds after the job finished (succeeded or failed) when it is
	// deleted, with all it owns; never when absent.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ManagedByName is the job's spec.managedBy, "" when absent.
func (j *DIJob) ManagedByName() string {
	if j.Spec.ManagedBy == nil {
		return ""
	}
	return *j.Spec.ManagedBy
}
