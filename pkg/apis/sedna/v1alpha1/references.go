package v1alpha1

import corev1 "k8s.io/api/core/v1"

// The Models each kind names in its spec. The GlobalManager's controllers, its
// edge hub (which sends a node the Models its jobs name) and the Model
// protection (which keeps a named Model from vanishing) read them here, so the
// three agree on what "names" means.

// ModelNames are the Models the job names: the aggregation worker's and the
// pretrained one.
func (j *FederatedLearningJob) ModelNames() []string {
	names := []string{j.Spec.AggregationWorker.Model.Name}
	if j.Spec.PretrainedModel != nil {
		names = append(names, j.Spec.PretrainedModel.Name)
	}
	return names
}

// ModelNames are the Models the service names: the edge worker's and the
// cloud worker's.
func (s *JointInferenceService) ModelNames() []string {
	return []string{s.Spec.EdgeWorker.Model.Name, s.Spec.CloudWorker.Model.Name}
}

// ModelNames are the Models the job names: the initial model, the deploy
// model and the initial evaluation model.
func (j *IncrementalLearningJob) ModelNames() []string {
	names := []string{j.Spec.InitialModel.Name, j.Spec.DeploySpec.Model.Name}
	if j.Spec.EvalSpec.InitialEvalModel != nil {
		names = append(names, j.Spec.EvalSpec.InitialEvalModel.Name)
	}
	return names
}

// The pod templates and Datasets each kind names, and the node a Dataset is
// on, read by the GlobalManager's edge hub to decide which edge nodes an
// object concerns.

// NodeName is the node the Dataset's files are on.
func (d *Dataset) NodeName() string { return d.Spec.NodeName }

// PodTemplates are the job's worker templates: the aggregation worker's, then
// each training worker's.
func (j *FederatedLearningJob) PodTemplates() []*corev1.PodTemplateSpec {
	ts := []*corev1.PodTemplateSpec{&j.Spec.AggregationWorker.Template}
	for i := range j.Spec.TrainingWorkers {
		ts = append(ts, &j.Spec.TrainingWorkers[i].Template)
	}
	return ts
}

// PodTemplates are the service's edge and cloud worker templates.
func (s *JointInferenceService) PodTemplates() []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&s.Spec.EdgeWorker.Template, &s.Spec.CloudWorker.Template}
}

// PodTemplates are the job's train, eval and deploy templates.
func (j *IncrementalLearningJob) PodTemplates() []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template}
}

// DatasetNames is the job's Dataset.
func (j *IncrementalLearningJob) DatasetNames() []string { return []string{j.Spec.Dataset.Name} }

// PodTemplates are the job's train, eval and deploy templates.
func (j *LifelongLearningJob) PodTemplates() []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template}
}

// DatasetNames is the job's Dataset.
func (j *LifelongLearningJob) DatasetNames() []string { return []string{j.Spec.Dataset.Name} }
