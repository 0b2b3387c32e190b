package learningcycle

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Job is a learning-cycle job as its generated Go type (a pointer to an
// IncrementalLearningJob or LifelongLearningJob), which copies itself.
type Job[J any] interface {
	common.Owner
	DeepCopy() J
}

// Kind is what the learning cycle needs from one job kind: its typed client,
// where its status fields are, and its decisions. The cycle itself (states,
// pods, rounds, reports) is the Controller's.
type Kind[J Job[J]] interface {
	// Client is the kind's generated client for namespace.
	Client(namespace string) Client[J]
	// Fields points at the status fields of job that the cycle drives.
	Fields(job J) Fields
	// Spec is what the cycle reads of job's spec.
	Spec(job J) Spec

	// Env is the kind's part of a worker's environment (models, knowledge
	// base) and the node paths that part names, for the worker of role in
	// the round st describes. refs holds every Dataset and Model job names.
	Env(job J, st *Status, role Role, refs Refs) (env []corev1.EnvVar, hostPaths []string)
	// SednaEnv names the variables of the kind's part of the environment
	// that Sedna's GlobalManager sets for the worker of role (see
	// common.ContainerEnv); the others are defaults a template overrides.
	SednaEnv(job J, role Role) []string
	// Decide says whether an evaluated round is deployed, with a sentence
	// saying why; results are the eval worker's, one per model of MODEL_URLS.
	Decide(job J, results []json.RawMessage) (deploy bool, sentence string)
	// Deployment says who carries out job's deploy stage.
	Deployment(job J) Deployment
	// Applied is called for each report recorded on job, after the cycle
	// moved (or not) and before the status is written: the kind updates its
	// own status fields or objects. Its events are recorded after the write.
	Applied(ctx context.Context, job J, info *edgeproto.WorkerInfo, o Outcome) ([]common.Event, error)
}

// Mounter is a Kind whose workers get node folders at paths of their own
// (an incremental job's inference worker, its hot update folder).
type Mounter[J any] interface {
	Mounts(job J, role Role) []common.NodeMount
}

// Client is the part of a kind's generated client the cycle uses.
type Client[J any] = common.StatusClient[J]

// Fields points at the status fields of a job that the cycle drives.
type Fields struct {
	Cycle              *sednav1.CycleStatus
	Conditions         *[]sednav1.StageCondition
	StartTime          **metav1.Time
	CompletionTime     **metav1.Time
	ObservedGeneration *int64
	// The pod counts; nil when the kind's status has none.
	Active, Succeeded, Failed *int32
}

// read copies the fields out.
func (f Fields) read() Status {
	st := Status{
		CycleStatus: *f.Cycle, Conditions: *f.Conditions, StartTime: *f.StartTime, CompletionTime: *f.CompletionTime,
		ObservedGeneration: *f.ObservedGeneration,
	}
	if f.Active != nil {
		st.Active, st.Succeeded, st.Failed = *f.Active, *f.Succeeded, *f.Failed
	}
	return st.DeepCopy()
}

// write puts st into the fields.
func (f Fields) write(st Status) {
	*f.Cycle, *f.Conditions, *f.StartTime, *f.CompletionTime = st.CycleStatus, st.Conditions, st.StartTime, st.CompletionTime
	*f.ObservedGeneration = st.ObservedGeneration
	if f.Active != nil {
		*f.Active, *f.Succeeded, *f.Failed = st.Active, st.Succeeded, st.Failed
	}
}

// Spec is what the cycle reads of a job's spec.
type Spec struct {
	// Dataset names the Dataset the cycle trains on; its node runs the workers.
	Dataset string
	// Models names the Models the job references.
	Models []string
	// OutputDir is where each round's data and models are written.
	OutputDir string
	// CredentialName is the Secret of S3 credentials for OutputDir.
	CredentialName string
	// Templates of the train, eval and inference workers.
	Train, Eval, Inference *corev1.PodTemplateSpec
	// Lifecycle is the job's suspend, managedBy, deadline and TTL.
	Lifecycle *sednav1.JobLifecycle
}

// Refs are the objects a job names, read from the listers.
type Refs struct {
	Dataset *sednav1.Dataset
	Models  map[string]*sednav1.Model
}

// Role is a worker's role in the cycle, in its worker-role label.
type Role string

// The workers of a learning cycle.
const (
	RoleTrain     Role = "train"
	RoleEval      Role = "eval"
	RoleInference Role = "inference"
)

// Deployment says who carries out a deploy stage.
type Deployment int

const (
	// DeployByController: the controller deploys at once by starting a new
	// inference worker for the round (lifelong learning).
	DeployByController Deployment = iota
	// DeployByEdge: the LocalController of the dataset's node copies the new
	// model over the deployed one and reports; a new inference worker then
	// replaces the old one.
	DeployByEdge
	// DeployByEdgeHot: as DeployByEdge, but the running inference worker
	// reloads the model file itself (MODEL_HOT_UPDATE) and is kept.
	DeployByEdgeHot
)

// Move is what a report did to the cycle.
type Move int

// The moves a report makes that a kind may act on.
const (
	// MoveNone: the report was recorded under edgeNodes only.
	MoveNone Move = iota
	// MoveOther: the report moved the cycle in a way kinds do not act on.
	MoveOther
	// MoveTrainCompleted: the train worker's completed report was accepted;
	// its results are the round's models.
	MoveTrainCompleted
	// MoveEvaluated: the eval worker's completed report was accepted; its
	// first result's metrics are the round's first model's.
	MoveEvaluated
	// MoveDeployed: the edge deployed the round's model.
	MoveDeployed
)

// Outcome is what a report did, for Kind.Applied.
type Outcome struct {
	Move Move
	// Round is the round the move concerns, as it stands after the move.
	Round sednav1.RoundStatus
	// Now is the time the report is applied at.
	Now metav1.Time
}

// Status is a copy of the part of a job's status the cycle drives.
type Status struct {
	sednav1.CycleStatus
	Conditions         []sednav1.StageCondition
	StartTime          *metav1.Time
	CompletionTime     *metav1.Time
	ObservedGeneration int64
	// Worker pods by phase (the incremental job shows them).
	Active, Succeeded, Failed int32
}

// DeepCopy copies st.
func (st *Status) DeepCopy() Status {
	out := Status{
		CycleStatus:        *st.CycleStatus.DeepCopy(),
		StartTime:          st.StartTime.DeepCopy(),
		CompletionTime:     st.CompletionTime.DeepCopy(),
		ObservedGeneration: st.ObservedGeneration,
		Active:             st.Active, Succeeded: st.Succeeded, Failed: st.Failed,
	}
	for _, c := range st.Conditions {
		out.Conditions = append(out.Conditions, *c.DeepCopy())
	}
	return out
}

// Finished says whether the job has ended: a stage failed on its last try.
func (st *Status) Finished() bool {
	return st.State == sednav1.StageFailed
}
