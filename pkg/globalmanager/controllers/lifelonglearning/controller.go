// Package lifelonglearning is the LifelongLearningJob controller: the learning
// cycle of package learningcycle, with this kind's decisions. Each round's train
// worker adds to a knowledge base (an index under the round's output); every
// evaluated round is deployed by starting an inference worker on that round's
// knowledge base; the status summarises the knowledge base's models, classes
// and unseen samples.
package lifelonglearning

import (
	"context"
	"encoding/json"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Name is the controller's name in logs, metrics and the queue.
const Name = "lifelonglearningjob"

// Config is what the GlobalManager's flags set for every lifelong job.
type Config struct {
	learningcycle.Config
	// KBServer is the knowledge base server put in workers' KB_SERVER; empty
	// leaves it unset.
	KBServer string
}

// Controller reconciles LifelongLearningJobs.
type Controller = learningcycle.Controller[*sednav1.LifelongLearningJob]

// NewController wires the controller to its informers; it starts nothing.
func NewController(_ context.Context, d kinds.Deps, config Config) (*Controller, error) {
	k := &kind{client: d.Client, dataPathPrefix: d.Worker.DataPathPrefix, kbServer: config.KBServer}
	jobs := d.Informers.Sedna().V1alpha1().LifelongLearningJobs().Informer()
	return learningcycle.New(Name, sednav1.LifelongLearningJobKind, k, d, jobs, config.Config)
}

// kind is the lifelong job's part of the learning cycle.
type kind struct {
	client         sednaclient.Interface
	dataPathPrefix string
	kbServer       string
}

func (k *kind) Client(namespace string) learningcycle.Client[*sednav1.LifelongLearningJob] {
	return k.client.SednaV1alpha1().LifelongLearningJobs(namespace)
}

func (k *kind) Fields(job *sednav1.LifelongLearningJob) learningcycle.Fields {
	s := &job.Status
	return learningcycle.Fields{
		Cycle: &s.CycleStatus, Conditions: &s.Conditions, StartTime: &s.StartTime, CompletionTime: &s.CompletionTime,
		ObservedGeneration: &s.ObservedGeneration,
	}
}

func (k *kind) Spec(job *sednav1.LifelongLearningJob) learningcycle.Spec {
	s := &job.Spec
	return learningcycle.Spec{
		Dataset: s.Dataset.Name, OutputDir: s.OutputDir, CredentialName: s.CredentialName,
		Train: &s.TrainSpec.Template, Eval: &s.EvalSpec.Template, Inference: &s.DeploySpec.Template,
		Lifecycle: &s.JobLifecycle,
	}
}

// Decide: every evaluated round is deployed; the knowledge base keeps what
// each round learned, so a round adds to the served model rather than
// replacing it.
func (k *kind) Decide(*sednav1.LifelongLearningJob, []json.RawMessage) (bool, string) {
	return true, "a lifelong learning job deploys every evaluated round: deploying"
}

// Deployment: the controller deploys by starting an inference worker on the
// round's knowledge base.
func (k *kind) Deployment(*sednav1.LifelongLearningJob) learningcycle.Deployment {
	return learningcycle.DeployByController
}
