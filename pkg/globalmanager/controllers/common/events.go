package common

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	sednascheme "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/scheme"
)

// Component is the event source users see in kubectl describe.
const Component = "nereid-globalmanager"

// Event reasons shared by the controllers.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulUpdate = "SuccessfulUpdate"
	ReasonFailedUpdate     = "FailedUpdate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// EventCacheKeys is how many recent events the recorder remembers, in each
// of its three caches (the per-object spam filter, the aggregation of similar
// events, and the count of repeated ones): a repeat of one of them updates
// its Event's count instead of making a new Event. client-go's 4,096 cost
// the GlobalManager about 5 MB once a fleet's wave of link events filled
// them (about 1.2 KB an event, its object's name and message in three
// keys); an event that repeats within a wave of more than this many others
// is written as a new Event, each still rate-limited per object.
const EventCacheKeys = 1024

// NewEventRecorder starts an event broadcaster that writes to the API server
// and returns a recorder for the GlobalManager's controllers, which knows the
// sedna.io kinds. The broadcaster stops with ctx.
func NewEventRecorder(ctx context.Context, client kubernetes.Interface) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: EventCacheKeys}))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(Scheme(), corev1.EventSource{Component: Component})
}

// Scheme knows the Kubernetes kinds and the sedna.io kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = kubescheme.AddToScheme(s)
	_ = sednascheme.AddToScheme(s)
	return s
}

// Event is an event a sync records only after the status that explains it is
// written.
type Event struct {
	Type, Reason, Message string
}

// RecordEvents records events about obj.
func RecordEvents(recorder record.EventRecorder, obj runtime.Object, events []Event) {
	for _, e := range events {
		recorder.Event(obj, e.Type, e.Reason, e.Message)
	}
}
