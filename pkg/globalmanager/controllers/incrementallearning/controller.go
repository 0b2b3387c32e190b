// Package incrementallearning is the IncrementalLearningJob controller: the
// learning cycle of package learningcycle, with this kind's decisions. Training starts
// from the initial model, then from the deployed one; the eval stage compares
// the new model with the deployed one; the deploy trigger decides; the
// LocalController of the dataset's node copies the new model over the deploy
// Model's file, and the inference worker reloads it or is replaced.
package incrementallearning

import (
	"context"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Name is the controller's name in logs, metrics and the queue.
const Name = "incrementallearningjob"

// Config is what the GlobalManager's flags set for every incremental job.
type Config = learningcycle.Config

// Controller reconciles IncrementalLearningJobs.
type Controller = learningcycle.Controller[*sednav1.IncrementalLearningJob]

// NewController wires the controller to its informers; it starts nothing.
func NewController(_ context.Context, d kinds.Deps, config Config) (*Controller, error) {
	k := &kind{client: d.Client, dataPathPrefix: d.Worker.DataPathPrefix}
	jobs := d.Informers.Sedna().V1alpha1().IncrementalLearningJobs().Informer()
	return learningcycle.New(Name, sednav1.IncrementalLearningJobKind, k, d, jobs, config)
}

// kind is the incremental job's part of the learning cycle.
type kind struct {
	client         sednaclient.Interface
	dataPathPrefix string
}

func (k *kind) Client(namespace string) learningcycle.Client[*sednav1.IncrementalLearningJob] {
	return k.client.SednaV1alpha1().IncrementalLearningJobs(namespace)
}

func (k *kind) Fields(job *sednav1.IncrementalLearningJob) learningcycle.Fields {
	s := &job.Status
	return learningcycle.Fields{
		Cycle: &s.CycleStatus, Conditions: &s.Conditions, StartTime: &s.StartTime, CompletionTime: &s.CompletionTime,
		ObservedGeneration: &s.ObservedGeneration, Active: &s.Active, Succeeded: &s.Succeeded, Failed: &s.Failed,
	}
}

func (k *kind) Spec(job *sednav1.IncrementalLearningJob) learningcycle.Spec {
	s := &job.Spec
	return learningcycle.Spec{
		Dataset: s.Dataset.Name, Models: job.ModelNames(), OutputDir: s.OutputDir, CredentialName: s.CredentialName,
		Train: &s.TrainSpec.Template, Eval: &s.EvalSpec.Template, Inference: &s.DeploySpec.Template,
		Lifecycle: &s.JobLifecycle,
	}
}
