package common

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// IndexOwner is the index of the children's caches by their owner: the
// namespace and the owner-uid label ("<namespace>/<uid>"). A sync finds an
// owner's children with one lookup instead of matching every object in the
// namespace, which made a sync's cost grow with the namespace.
const IndexOwner = "nereid.io/owner"

// ChildIndexers are the indexes a cache of children needs (IndexOwner).
var ChildIndexers = cache.Indexers{IndexOwner: indexOwner}

func indexOwner(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if uid := m.GetLabels()[LabelOwnerUID]; uid != "" {
		return []string{ownerIndexKey(m.GetNamespace(), uid)}, nil
	}
	return nil, nil
}

func ownerIndexKey(namespace, uid string) string { return namespace + "/" + uid }

// IndexChildren adds IndexOwner to each informer that lacks it (informers
// are shared between the kinds' controllers), before they start, and
// returns their indexers.
func IndexChildren(informers ...cache.SharedIndexInformer) ([]cache.Indexer, error) {
	out := make([]cache.Indexer, len(informers))
	for i, inf := range informers {
		if err := addIndexOnce(inf, IndexOwner, indexOwner); err != nil {
			return nil, err
		}
		out[i] = inf.GetIndexer()
	}
	return out, nil
}

// IndexUID is the index of owners' caches by "<namespace>/<uid>": how a
// child whose controller is not its owner (a service's pod, controlled by
// a ReplicaSet) finds its owner from its owner-uid label.
const IndexUID = "nereid.io/uid"

// IndexByUID adds IndexUID to an owners' informer that lacks it, before it
// starts, and returns its indexer.
func IndexByUID(inf cache.SharedIndexInformer) (cache.Indexer, error) {
	err := addIndexOnce(inf, IndexUID, func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil
		}
		return []string{ownerIndexKey(m.GetNamespace(), string(m.GetUID()))}, nil
	})
	return inf.GetIndexer(), err
}

// addIndexOnce adds the index name to inf unless it has it: the informers
// are shared, and each controller of a kind asks.
func addIndexOnce(inf cache.SharedIndexInformer, name string, index cache.IndexFunc) error {
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{name: index}); err != nil {
		return fmt.Errorf("adding the %s index: %w", name, err)
	}
	return nil
}

// ListOwned lists from indexer (one with IndexOwner) the objects labelled as
// owner's children in its namespace.
func ListOwned[T any](indexer cache.Indexer, owner metav1.Object) ([]T, error) {
	objs, err := indexer.ByIndex(IndexOwner, ownerIndexKey(owner.GetNamespace(), string(owner.GetUID())))
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			return nil, fmt.Errorf("the cache holds a %T, not a %T", o, *new(T))
		}
		out = append(out, t)
	}
	return out, nil
}
