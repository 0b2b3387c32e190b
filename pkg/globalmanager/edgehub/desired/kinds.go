package desired

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Kind is everything the hub knows of one kind of object it sends to edge
// nodes, from the GlobalManager's table of kinds (package kinds); what it
// needs of each object it reads through the interfaces below, which the API
// types implement. A new edge kind is a kinds.Kind with an Edge, and those
// methods on its type: no function of the hub switches on kinds.
type Kind struct {
	// Name is the API kind, as in edgeproto.ObjectRef.Kind.
	Name string
	// APIVersion is group/version, put into the objects sent (a cached
	// object has no TypeMeta).
	APIVersion string
	Informer   cache.SharedIndexInformer
	// Order, SendStatus, Workers, OwnReports and WorkersNeedLocalController
	// are the kind's kinds.Edge.
	Order                      int
	SendStatus                 bool
	Workers                    bool
	OwnReports                 bool
	WorkersNeedLocalController bool
}

// What the hub reads of an object, when its type has it.
type (
	// Templated objects run workers from these pod templates; a template
	// with spec.nodeName names an edge node before any pod exists.
	Templated interface {
		PodTemplates() []*corev1.PodTemplateSpec
	}
	// Placed objects live on one node (a Dataset's files).
	Placed interface{ NodeName() string }
	// modelNamer objects name Models (in their namespace), which their
	// nodes then need.
	modelNamer interface{ ModelNames() []string }
	// datasetNamer objects name Datasets (in their namespace); the node of
	// each Dataset needs the object (a learning cycle's train trigger runs
	// there).
	datasetNamer interface{ DatasetNames() []string }
)

// KindsOf are the kinds of table the hub sends, with their informers in
// factory.
func KindsOf(table []*kinds.Kind, factory nereidinformers.SharedInformerFactory) []*Kind {
	var out []*Kind
	for _, k := range table {
		if k.Edge == nil {
			continue
		}
		out = append(out, &Kind{
			Name: k.GVK.Kind, APIVersion: k.GVK.GroupVersion().String(), Informer: k.Informer(factory),
			Order: k.Edge.Order, SendStatus: k.Edge.SendStatus, Workers: k.Edge.Workers, OwnReports: k.Edge.OwnReports,
			WorkersNeedLocalController: k.Edge.WorkersNeedLocalController,
		})
	}
	return out
}

// edgeKind is the kind of the table named name, as the hub would keep it
// (without informer or conditions); ok is false when no kind of that name
// travels to the edge.
func edgeKind(name string) (k *Kind, ok bool) {
	for _, t := range kinds.All() {
		if t.GVK.Kind == name && t.Edge != nil {
			return &Kind{Name: name, APIVersion: t.GVK.GroupVersion().String(), Order: t.Edge.Order,
				SendStatus: t.Edge.SendStatus, Workers: t.Edge.Workers, OwnReports: t.Edge.OwnReports,
				WorkersNeedLocalController: t.Edge.WorkersNeedLocalController}, true
		}
	}
	return nil, false
}

// templateNodes are the nodes obj's templates are pinned to, without
// duplicates, and the node obj is placed on.
func templateNodes(obj metav1.Object) []string {
	var nodes []string
	add := func(n string) {
		if n != "" && !Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	if t, ok := obj.(Templated); ok {
		for _, tmpl := range t.PodTemplates() {
			add(tmpl.Spec.NodeName)
		}
	}
	if p, ok := obj.(Placed); ok {
		add(p.NodeName())
	}
	return nodes
}

func modelNames(obj metav1.Object) []string {
	return common.ModelNames(obj)
}

// DatasetNames are the Datasets obj names (in its namespace), without
// duplicates.
func DatasetNames(obj metav1.Object) []string {
	if d, ok := obj.(datasetNamer); ok {
		return nonEmpty(d.DatasetNames())
	}
	return nil
}

func nonEmpty(names []string) []string {
	out := names[:0:0]
	for _, n := range names {
		if n != "" && !Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Contains says whether list holds s.
func Contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
