package desired

import (
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// What reaches the edge of an object is what EncodeObject sends: its spec,
// its metadata but for what only the API server and kubectl use, and, for
// the kinds whose status a LocalController reads (the learning cycles), its
// status but for the cloud's own bookkeeping. A change to anything else
// (the status of the other kinds, the edge nodes' reports, conditions,
// managedFields, the last-applied annotation) leaves the object's digest as
// it was, so it is not sent: not when it changes, not after a reconnect.

// lastAppliedAnnotation is kubectl's copy of the applied manifest: as large
// as the object, and of no use on the edge.
const lastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// cloudOnlyStatus are the status fields of a kind that sends its status
// that no LocalController reads: what the cloud heard from the edge nodes,
// and the conditions. Each report the edge sends changes the first, so
// sending it would send every report back down.
var cloudOnlyStatus = []string{"edgeNodes", "conditions"}

// EncodeObject is the JSON of a cached object as a LocalController stores it
// (see above), with apiVersion and kind (a cached object has neither), and
// the object's digest: edgeproto.ObjectDigest of that JSON without the
// resourceVersion. The cached object is not changed.
func EncodeObject(k *Kind, obj metav1.Object) (json.RawMessage, string, error) {
	fail := func(err error) (json.RawMessage, string, error) {
		return nil, "", fmt.Errorf("encoding %s %s/%s: %w", k.Name, obj.GetNamespace(), obj.GetName(), err)
	}
	raw, err := edgeproto.Marshal(obj)
	if err != nil {
		return fail(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return fail(err)
	}
	top["apiVersion"], _ = edgeproto.Marshal(k.APIVersion)
	top["kind"], _ = edgeproto.Marshal(k.Name)
	if !k.SendStatus {
		delete(top, "status")
	} else if st, ok := top["status"]; ok {
		var status map[string]json.RawMessage
		if err := json.Unmarshal(st, &status); err != nil {
			return fail(err)
		}
		for _, f := range cloudOnlyStatus {
			delete(status, f)
		}
		if top["status"], err = edgeproto.Marshal(status); err != nil {
			return fail(err)
		}
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(top["metadata"], &meta); err != nil {
		return fail(err)
	}
	delete(meta, "managedFields")
	if annotations := obj.GetAnnotations(); annotations[lastAppliedAnnotation] != "" {
		kept := make(map[string]string, len(annotations))
		for key, v := range annotations {
			if key != lastAppliedAnnotation {
				kept[key] = v
			}
		}
		if len(kept) == 0 {
			delete(meta, "annotations")
		} else {
			meta["annotations"], _ = edgeproto.Marshal(kept)
		}
	}
	rv, hasRV := meta["resourceVersion"]
	delete(meta, "resourceVersion")
	if top["metadata"], err = edgeproto.Marshal(meta); err != nil {
		return fail(err)
	}
	withoutRV, err := edgeproto.Marshal(top)
	if err != nil {
		return fail(err)
	}
	digest := edgeproto.ObjectDigest(withoutRV)
	if !hasRV {
		return withoutRV, digest, nil
	}
	meta["resourceVersion"] = rv
	if top["metadata"], err = edgeproto.Marshal(meta); err != nil {
		return fail(err)
	}
	out, err := edgeproto.Marshal(top)
	if err != nil {
		return fail(err)
	}
	return out, digest, nil
}

// Digest is the digest the hub gives obj, an object of the edge kind
// kindName (its API kind, "Dataset"), as LocalControllers hold it
// (edgeproto.ObjectVersion.Digest): for tests and tools that check what an
// edge node holds against the cluster. The kind's package must be linked in
// (package kinds/all links them all).
func Digest(kindName string, obj metav1.Object) (string, error) {
	k, ok := edgeKind(kindName)
	if !ok {
		return "", fmt.Errorf("%s is not a kind sent to edge nodes (is its package linked in?)", kindName)
	}
	_, digest, err := EncodeObject(k, obj)
	return digest, err
}

// Digests hold the digest of each cached object's latest version, by UID,
// so that it is computed once per version rather than once per node and
// sync. Entries go when their objects are deleted (Forget). The zero value
// is ready to use.
type Digests struct {
	mu sync.Mutex
	m  map[types.UID]cachedDigest
}

type cachedDigest struct {
	resourceVersion string
	digest          string
}

// Of is obj's digest ("" when it cannot be encoded; sendUpsert then says
// why).
func (c *Digests) Of(k *Kind, obj metav1.Object) string {
	if d, ok := c.cached(obj); ok {
		return d
	}
	_, digest, err := EncodeObject(k, obj)
	if err != nil {
		return ""
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[types.UID]cachedDigest)
	}
	c.m[obj.GetUID()] = cachedDigest{resourceVersion: obj.GetResourceVersion(), digest: digest}
	c.mu.Unlock()
	return digest
}

// cached is the digest the cache holds of obj's version, if it does.
func (c *Digests) cached(obj metav1.Object) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[obj.GetUID()]
	if !ok || d.resourceVersion != obj.GetResourceVersion() {
		return "", false
	}
	return d.digest, true
}

// Forget drops the digest of a deleted object (or its tombstone).
func (c *Digests) Forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		c.mu.Lock()
		delete(c.m, o.GetUID())
		c.mu.Unlock()
	}
}

// SameOnEdge says whether an update of an object from oldObj to newObj
// changes nothing the edge uses: then no node's set or copy changes.
func (c *Digests) SameOnEdge(k *Kind, oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 || o.GetUID() != n.GetUID() {
		return false
	}
	oldDigest, ok := c.cached(o)
	if !ok {
		var err error
		if _, oldDigest, err = EncodeObject(k, o); err != nil {
			return false
		}
	}
	newDigest := c.Of(k, n)
	return newDigest != "" && newDigest == oldDigest
}
