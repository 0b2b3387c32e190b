package edgehub

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// kind is everything the hub knows of one kind of object it sends to edge
// nodes, from the GlobalManager's table of kinds (package kinds); what it
// needs of each object it reads through the interfaces below, which the API
// types implement. A new edge kind is a kinds.Kind with an Edge, and those
// methods on its type: no function of the hub switches on kinds.
type kind struct {
	// name is the API kind, as in edgeproto.ObjectRef.Kind.
	name string
	// apiVersion is group/version, put into the objects sent (a cached object
	// has no TypeMeta).
	apiVersion string
	informer   cache.SharedIndexInformer
	// order, sendStatus, workers and ownReports are the kind's kinds.Edge.
	order      int
	sendStatus bool
	workers    bool
	ownReports bool
	// conditions reads and writes the EdgeSynced condition of its objects.
	conditions conditionAccess
}

// What the hub reads of an object, when its type has it.
type (
	// templated objects run workers from these pod templates; a template
	// with spec.nodeName names an edge node before any pod exists.
	templated interface {
		PodTemplates() []*corev1.PodTemplateSpec
	}
	// placed objects live on one node (a Dataset's files).
	placed interface{ NodeName() string }
	// modelNamer objects name Models (in their namespace), which their
	// nodes then need.
	modelNamer interface{ ModelNames() []string }
	// datasetNamer objects name Datasets (in their namespace); the node of
	// each Dataset needs the object (a learning cycle's train trigger runs
	// there).
	datasetNamer interface{ DatasetNames() []string }
)

// edgeKinds are the kinds of table the hub sends, with their informers in
// factory; it writes their status with client.
func edgeKinds(table []*kinds.Kind, client nereidclient.Interface, factory nereidinformers.SharedInformerFactory) []*kind {
	var out []*kind
	for _, k := range table {
		if k.Edge == nil {
			continue
		}
		update := k.Edge.UpdateStatus
		out = append(out, &kind{
			name: k.GVK.Kind, apiVersion: k.GVK.GroupVersion().String(), informer: k.Informer(factory),
			order: k.Edge.Order, sendStatus: k.Edge.SendStatus, workers: k.Edge.Workers, ownReports: k.Edge.OwnReports,
			conditions: conditionsOf(func(ctx context.Context, obj metav1.Object) error { return update(ctx, client, obj) }),
		})
	}
	return out
}

// edgeKind is the kind of the table named name, as the hub would keep it
// (without informer or conditions); ok is false when no kind of that name
// travels to the edge.
func edgeKind(name string) (k *kind, ok bool) {
	for _, t := range kinds.All() {
		if t.GVK.Kind == name && t.Edge != nil {
			return &kind{name: name, apiVersion: t.GVK.GroupVersion().String(), order: t.Edge.Order,
				sendStatus: t.Edge.SendStatus, workers: t.Edge.Workers, ownReports: t.Edge.OwnReports}, true
		}
	}
	return nil, false
}

// templateNodes are the nodes obj's templates are pinned to, without
// duplicates, and the node obj is placed on.
func templateNodes(obj metav1.Object) []string {
	var nodes []string
	add := func(n string) {
		if n != "" && !contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	if t, ok := obj.(templated); ok {
		for _, tmpl := range t.PodTemplates() {
			add(tmpl.Spec.NodeName)
		}
	}
	if p, ok := obj.(placed); ok {
		add(p.NodeName())
	}
	return nodes
}

func modelNames(obj metav1.Object) []string {
	return common.ModelNames(obj)
}

func datasetNames(obj metav1.Object) []string {
	if d, ok := obj.(datasetNamer); ok {
		return nonEmpty(d.DatasetNames())
	}
	return nil
}

func nonEmpty(names []string) []string {
	out := names[:0:0]
	for _, n := range names {
		if n != "" && !contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
