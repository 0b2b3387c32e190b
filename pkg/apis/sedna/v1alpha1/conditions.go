package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The status conditions of each kind, for code that writes conditions of
// any kind (the GlobalManager's edge hub writes EdgeSynced and EdgeLinked):
// Datasets and Models keep metav1.Conditions, the jobs JobConditions.

// MetaConditions are the Dataset's status conditions.
func (d *Dataset) MetaConditions() *[]metav1.Condition { return &d.Status.Conditions }

// MetaConditions are the Model's status conditions.
func (m *Model) MetaConditions() *[]metav1.Condition { return &m.Status.Conditions }

// ConditionList are the job's status conditions.
func (j *FederatedLearningJob) ConditionList() *[]JobCondition { return &j.Status.Conditions }

// ConditionList are the service's status conditions.
func (s *JointInferenceService) ConditionList() *[]JobCondition { return &s.Status.Conditions }

// ConditionList are the job's conditions (status.jobConditions; its
// status.conditions are the learning cycle's stages).
func (j *IncrementalLearningJob) ConditionList() *[]JobCondition { return &j.Status.JobConditions }

// ConditionList are the job's conditions (status.jobConditions; its
// status.conditions are the learning cycle's stages).
func (j *LifelongLearningJob) ConditionList() *[]JobCondition { return &j.Status.JobConditions }
