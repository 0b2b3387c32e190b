package v1alpha1

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
