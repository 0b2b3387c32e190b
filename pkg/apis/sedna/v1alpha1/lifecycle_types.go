package v1alpha1

// ManagedByNereid is the value of spec.managedBy that names Nereid's
// GlobalManager; an object without managedBy is Nereid's too.
const ManagedByNereid = "nereid.io/globalmanager"

// ServiceLifecycle is what every Kubernetes workload has and Sedna's did not:
// it can be suspended and handed to another controller. Nereid's own, as
// a Kubernetes Job's and a JobSet's fields of the same names; absent, the
// object runs as Sedna's does.
type ServiceLifecycle struct {
	// True stops the object's pods (its status, its edge reports and where
	// its learning cycle stands are kept, and it holds no quota); false or
	// absent runs them again from where it was. One created suspended makes
	// nothing until resumed. The Suspended condition says since when.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// The controller that runs this object: absent or nereid.io/globalmanager
	// for Nereid's GlobalManager; any other value leaves it wholly to that
	// controller (no pods, no status writes), as MultiKueue runs a job in a
	// worker cluster. It cannot be changed once set.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// JobLifecycle is a job's ServiceLifecycle with the two fields that only
// an object that finishes has: a deadline and a clean-up after it.
type JobLifecycle struct {
	ServiceLifecycle `json:",inline"`
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

// ManagedByName is spec.managedBy, "" when absent.
func (l *ServiceLifecycle) ManagedByName() string {
	if l.ManagedBy == nil {
		return ""
	}
	return *l.ManagedBy
}

// ManagedByName is the job's spec.managedBy, "" when absent.
func (j *FederatedLearningJob) ManagedByName() string { return j.Spec.ManagedByName() }

// ManagedByName is the job's spec.managedBy, "" when absent.
func (j *IncrementalLearningJob) ManagedByName() string { return j.Spec.ManagedByName() }

// ManagedByName is the job's spec.managedBy, "" when absent.
func (j *LifelongLearningJob) ManagedByName() string { return j.Spec.ManagedByName() }

// ManagedByName is the service's spec.managedBy, "" when absent.
func (s *JointInferenceService) ManagedByName() string { return s.Spec.ManagedByName() }
