package replicasapi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	div1listers "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// Defaults of V1Config.
const (
	// DefaultV1MaxReplicasPerRequest bounds the collectors, and the
	// learners, one POST may ask for.
	DefaultV1MaxReplicasPerRequest = 64
	// DefaultV1MaxLiveReplicas bounds a job's live collectors, and its live
	// learners and aggregators together.
	DefaultV1MaxLiveReplicas = 256
	// DefaultV1RequestsPerSecond bounds the changes (POST, DELETE,
	// replicas/failed) made to one job: DI-engine's coordinator asks once
	// at start and then at most once a second.
	DefaultV1RequestsPerSecond = 2
	// DefaultV1IdempotencyTTL is how long the answer to a request with an
	// Idempotency-Key is kept for its repetitions.
	DefaultV1IdempotencyTTL = 10 * time.Minute
	// DefaultV1MaxIdempotencyKeys bounds the answers kept, every job's
	// together; the oldest goes first.
	DefaultV1MaxIdempotencyKeys = 1024
	// DefaultV1MaxJobs bounds the jobs whose rate and pending pods are
	// remembered at once.
	DefaultV1MaxJobs = 4096
)

// DefaultAggregatorConfig is the AggregatorConfig DI-orchestrator's
// di-server read (its --agconfig default).
var DefaultAggregatorConfig = types.NamespacedName{Namespace: "di-system", Name: "aggregator-config"}

// GPUAllocator places the world size of a learner that asks for more than
// one GPU over the cluster's nodes (allocator.GPUPlacer).
type GPUAllocator interface {
	// Place returns how many GPUs each DDP learner pod takes on which node
	// for a learner of spec, or an error saying why worldSize GPUs cannot
	// be placed; the slots count as taken until Hold or Release.
	Place(worldSize int, learner *corev1.PodSpec) ([]coordinated.GPUSlot, error)
	// Hold takes the slots' pods, once created, as taken until the cache
	// has them; Release gives back slots whose pods will not be made.
	Hold(slots []coordinated.GPUSlot, pods []*corev1.Pod)
	Release(slots []coordinated.GPUSlot)
}

// V1Config is what the v1 replicas server (V1Handler) needs besides
// Config. AggregatorConfigs is required when learners may ask for more than
// one GPU; a zero bound takes its default.
type V1Config struct {
	// ServerURL is KUBERNETES_SERVER_URL of the pods it creates: where
	// DI-engine's coordinator and aggregators reach this server (host:port).
	ServerURL string
	// EdgeLinkGrace is how long a collector on an edge node tolerates its
	// node's link outage (coordinated.Place).
	EdgeLinkGrace time.Duration

	// AggregatorConfig names the AggregatorConfig aggregators are made from
	// (DefaultAggregatorConfig).
	AggregatorConfig types.NamespacedName
	// AggregatorConfigs is the informer's lister of AggregatorConfigs, and
	// AggregatorConfigsSynced says when it has filled.
	AggregatorConfigs       div1listers.AggregatorConfigLister
	AggregatorConfigsSynced cache.InformerSynced
	// GPUs places learners of more than one GPU (coordinated.DDPLearners
	// builds their pods); nil answers such learners 501.
	GPUs GPUAllocator

	// MaxReplicasPerRequest bounds the collectors, and the learners, of
	// one request (64); MaxLiveReplicas a job's live collectors, and its
	// live learners and aggregators (256 each).
	MaxReplicasPerRequest int
	MaxLiveReplicas       int
	// RequestsPerSecond bounds the changes made to one job (2, bursts of
	// twice that); past it, 429.
	RequestsPerSecond float64
	// IdempotencyTTL is how long an Idempotency-Key's answer is kept (10
	// minutes), MaxIdempotencyKeys how many are (1024).
	IdempotencyTTL     time.Duration
	MaxIdempotencyKeys int
	// MaxJobs bounds the jobs whose rate and pending pods are kept (4096);
	// past it, 503, unless a job kept rests (v1Jobs.pruneLocked).
	MaxJobs int
}

func (c V1Config) withDefaults() V1Config {
	if c.AggregatorConfig.Name == "" {
		c.AggregatorConfig = DefaultAggregatorConfig
	}
	if c.MaxReplicasPerRequest <= 0 {
		c.MaxReplicasPerRequest = DefaultV1MaxReplicasPerRequest
	}
	if c.MaxLiveReplicas <= 0 {
		c.MaxLiveReplicas = DefaultV1MaxLiveReplicas
	}
	if c.RequestsPerSecond <= 0 {
		c.RequestsPerSecond = DefaultV1RequestsPerSecond
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = DefaultV1IdempotencyTTL
	}
	if c.MaxIdempotencyKeys <= 0 {
		c.MaxIdempotencyKeys = DefaultV1MaxIdempotencyKeys
	}
	if c.MaxJobs <= 0 {
		c.MaxJobs = DefaultV1MaxJobs
	}
	return c
}
