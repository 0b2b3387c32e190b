package edgehub

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// The indexes the hub adds to the sedna informers. Their names are the hub's
// own so they never clash with a controller's indexes on the same informer.
const (
	// indexNode keys jobs and services by the nodes their templates name,
	// and Datasets by their node.
	indexNode = "edgehub.nereid.io/node"
	// indexDataset keys incremental and lifelong jobs by namespace/dataset.
	indexDataset = "edgehub.nereid.io/dataset"
	// indexModel keys jobs and services by namespace/model for each Model
	// they name.
	indexModel = "edgehub.nereid.io/model"
)

// desiredObject is the latest version of an object that concerns a node.
type desiredObject struct {
	version string
	obj     metav1.Object
}

// addIndexers adds the hub's indexes to the informers; it must run before
// they start.
func (h *Hub) addIndexers() error {
	nsKeys := func(ns string, names []string) []string {
		var keys []string
		for _, n := range names {
			if n != "" && !contains(keys, ns+"/"+n) {
				keys = append(keys, ns+"/"+n)
			}
		}
		return keys
	}
	add := func(inf cache.SharedIndexInformer, idx cache.Indexers) error {
		if err := inf.AddIndexers(idx); err != nil {
			return fmt.Errorf("adding edge hub indexers: %w", err)
		}
		return nil
	}
	if err := add(h.inf.datasets, cache.Indexers{indexNode: func(obj any) ([]string, error) {
		if d, ok := obj.(*sednav1.Dataset); ok && d.Spec.NodeName != "" {
			return []string{d.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	if err := add(h.inf.federated, cache.Indexers{
		indexNode: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.FederatedLearningJob); ok {
				return nodesOf(templatesOfFederated(j)), nil
			}
			return nil, nil
		},
		indexModel: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.FederatedLearningJob); ok {
				return nsKeys(j.Namespace, j.ModelNames()), nil
			}
			return nil, nil
		},
	}); err != nil {
		return err
	}
	if err := add(h.inf.joint, cache.Indexers{
		indexNode: func(obj any) ([]string, error) {
			if s, ok := obj.(*sednav1.JointInferenceService); ok {
				return nodesOf(templatesOfJointInference(s)), nil
			}
			return nil, nil
		},
		indexModel: func(obj any) ([]string, error) {
			if s, ok := obj.(*sednav1.JointInferenceService); ok {
				return nsKeys(s.Namespace, s.ModelNames()), nil
			}
			return nil, nil
		},
	}); err != nil {
		return err
	}
	if err := add(h.inf.incremental, cache.Indexers{
		indexNode: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.IncrementalLearningJob); ok {
				return nodesOf(templatesOfIncremental(j)), nil
			}
			return nil, nil
		},
		indexDataset: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.IncrementalLearningJob); ok {
				return nsKeys(j.Namespace, []string{j.Spec.Dataset.Name}), nil
			}
			return nil, nil
		},
		indexModel: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.IncrementalLearningJob); ok {
				return nsKeys(j.Namespace, j.ModelNames()), nil
			}
			return nil, nil
		},
	}); err != nil {
		return err
	}
	return add(h.inf.lifelong, cache.Indexers{
		indexNode: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.LifelongLearningJob); ok {
				return nodesOf(templatesOfLifelong(j)), nil
			}
			return nil, nil
		},
		indexDataset: func(obj any) ([]string, error) {
			if j, ok := obj.(*sednav1.LifelongLearningJob); ok {
				return nsKeys(j.Namespace, []string{j.Spec.Dataset.Name}), nil
			}
			return nil, nil
		},
	})
}

// byIndex returns the objects of type T an informer's index holds under key.
func byIndex[T any](inf cache.SharedIndexInformer, index, key string) []T {
	found, err := inf.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil // not reached: the index is the hub's own
	}
	out := make([]T, 0, len(found))
	for _, o := range found {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// getCached returns the object of type T an informer's cache holds under
// namespace/name, or false.
func getCached[T any](inf cache.SharedIndexInformer, namespace, name string) (T, bool) {
	var zero T
	o, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

// candidates gathers from the caches, through the indexes, a superset of the
// objects that concern node, for concerning to decide.
func (h *Hub) candidates(node string) objects {
	var objs objects
	objs.datasets = byIndex[*sednav1.Dataset](h.inf.datasets, indexNode, node)
	objs.federatedLearningJobs = byIndex[*sednav1.FederatedLearningJob](h.inf.federated, indexNode, node)
	objs.jointInferenceServices = byIndex[*sednav1.JointInferenceService](h.inf.joint, indexNode, node)
	objs.incrementalJobs = byIndex[*sednav1.IncrementalLearningJob](h.inf.incremental, indexNode, node)
	objs.lifelongJobs = byIndex[*sednav1.LifelongLearningJob](h.inf.lifelong, indexNode, node)
	// Jobs whose dataset is on node; the duplicates of jobs found above only
	// map to the same ref.
	for _, d := range objs.datasets {
		key := d.Namespace + "/" + d.Name
		objs.incrementalJobs = append(objs.incrementalJobs, byIndex[*sednav1.IncrementalLearningJob](h.inf.incremental, indexDataset, key)...)
		objs.lifelongJobs = append(objs.lifelongJobs, byIndex[*sednav1.LifelongLearningJob](h.inf.lifelong, indexDataset, key)...)
	}
	seen := make(map[nsName]bool)
	addModels := func(ns string, names []string) {
		for _, n := range names {
			k := nsName{ns, n}
			if n == "" || seen[k] {
				continue
			}
			seen[k] = true
			if m, ok := getCached[*sednav1.Model](h.inf.models, ns, n); ok {
				objs.models = append(objs.models, m)
			}
		}
	}
	for _, j := range objs.federatedLearningJobs {
		addModels(j.Namespace, j.ModelNames())
	}
	for _, s := range objs.jointInferenceServices {
		addModels(s.Namespace, s.ModelNames())
	}
	for _, j := range objs.incrementalJobs {
		addModels(j.Namespace, j.ModelNames())
	}
	return objs
}

// desired is the latest version of every object that concerns node.
func (h *Hub) desired(node string) map[edgeproto.ObjectRef]desiredObject {
	c := concerning(node, h.candidates(node))
	out := make(map[edgeproto.ObjectRef]desiredObject, len(c))
	for ref, obj := range c {
		out[ref] = desiredObject{version: obj.GetResourceVersion(), obj: obj}
	}
	return out
}

// concerns reports whether the object ref concerns node now, by the caches.
func (h *Hub) concerns(node string, ref edgeproto.ObjectRef) bool {
	var objs objects
	addDataset := func(ns, name string) {
		if d, ok := getCached[*sednav1.Dataset](h.inf.datasets, ns, name); ok {
			objs.datasets = append(objs.datasets, d)
		}
	}
	switch ref.Kind {
	case sednav1.FederatedLearningJobKind.Kind:
		if j, ok := getCached[*sednav1.FederatedLearningJob](h.inf.federated, ref.Namespace, ref.Name); ok {
			objs.federatedLearningJobs = append(objs.federatedLearningJobs, j)
		}
	case sednav1.JointInferenceServiceKind.Kind:
		if s, ok := getCached[*sednav1.JointInferenceService](h.inf.joint, ref.Namespace, ref.Name); ok {
			objs.jointInferenceServices = append(objs.jointInferenceServices, s)
		}
	case sednav1.IncrementalLearningJobKind.Kind:
		if j, ok := getCached[*sednav1.IncrementalLearningJob](h.inf.incremental, ref.Namespace, ref.Name); ok {
			objs.incrementalJobs = append(objs.incrementalJobs, j)
			addDataset(j.Namespace, j.Spec.Dataset.Name)
		}
	case sednav1.LifelongLearningJobKind.Kind:
		if j, ok := getCached[*sednav1.LifelongLearningJob](h.inf.lifelong, ref.Namespace, ref.Name); ok {
			objs.lifelongJobs = append(objs.lifelongJobs, j)
			addDataset(j.Namespace, j.Spec.Dataset.Name)
		}
	case sednav1.DatasetKind.Kind:
		addDataset(ref.Namespace, ref.Name)
	default:
		return false // reports are about jobs, services and datasets only
	}
	_, ok := concerning(node, objs)[ref]
	return ok
}

// affectedNodes are the nodes whose set of concerning objects an event on obj
// (a cached sedna object, or a tombstone of one) may change.
func (h *Hub) affectedNodes(obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	datasetNode := func(ns, name string) []string {
		if d, ok := getCached[*sednav1.Dataset](h.inf.datasets, ns, name); ok && d.Spec.NodeName != "" {
			return []string{d.Spec.NodeName}
		}
		return nil
	}
	switch o := obj.(type) {
	case *sednav1.Dataset:
		// Its jobs move with it; the dataset's node is the only one whose
		// set they enter or leave through it.
		if o.Spec.NodeName != "" {
			return []string{o.Spec.NodeName}
		}
	case *sednav1.Model:
		key := o.Namespace + "/" + o.Name
		var nodes []string
		for _, j := range byIndex[*sednav1.FederatedLearningJob](h.inf.federated, indexModel, key) {
			nodes = append(nodes, h.affectedNodes(j)...)
		}
		for _, s := range byIndex[*sednav1.JointInferenceService](h.inf.joint, indexModel, key) {
			nodes = append(nodes, h.affectedNodes(s)...)
		}
		for _, j := range byIndex[*sednav1.IncrementalLearningJob](h.inf.incremental, indexModel, key) {
			nodes = append(nodes, h.affectedNodes(j)...)
		}
		return nodes
	case *sednav1.FederatedLearningJob:
		return nodesOf(templatesOfFederated(o))
	case *sednav1.JointInferenceService:
		return nodesOf(templatesOfJointInference(o))
	case *sednav1.IncrementalLearningJob:
		return append(nodesOf(templatesOfIncremental(o)), datasetNode(o.Namespace, o.Spec.Dataset.Name)...)
	case *sednav1.LifelongLearningJob:
		return append(nodesOf(templatesOfLifelong(o)), datasetNode(o.Namespace, o.Spec.Dataset.Name)...)
	}
	return nil
}

// encodeObject is the JSON of a cached object as an LocalController stores
// it: with apiVersion and kind (a cached object has neither) and without
// managedFields, which only the API server uses. The cached object is not
// changed: the copies are shallow, of the fields set.
func encodeObject(obj metav1.Object) (json.RawMessage, error) {
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: sednav1.SchemeGroupVersion.String(), Kind: kind}
	}
	meta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		m.ManagedFields = nil
		return m
	}
	var v any
	switch o := obj.(type) {
	case *sednav1.Dataset:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.DatasetKind.Kind), meta(o.ObjectMeta)
		v = &c
	case *sednav1.Model:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.ModelKind.Kind), meta(o.ObjectMeta)
		v = &c
	case *sednav1.FederatedLearningJob:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.FederatedLearningJobKind.Kind), meta(o.ObjectMeta)
		v = &c
	case *sednav1.JointInferenceService:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.JointInferenceServiceKind.Kind), meta(o.ObjectMeta)
		v = &c
	case *sednav1.IncrementalLearningJob:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.IncrementalLearningJobKind.Kind), meta(o.ObjectMeta)
		v = &c
	case *sednav1.LifelongLearningJob:
		c := *o
		c.TypeMeta, c.ObjectMeta = typeMeta(sednav1.LifelongLearningJobKind.Kind), meta(o.ObjectMeta)
		v = &c
	default:
		return nil, fmt.Errorf("encoding %T: not a kind the edge hub sends", obj)
	}
	return json.Marshal(v)
}
