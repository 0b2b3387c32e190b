package workerapi

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// ownerOf is the object a report of worker, from addr, is for: the object
// whose pod on this node the worker is, at that address. The body's owner is
// not trusted, nor needed: Sedna's own library sends ownerKind "default" from
// a federated trainer (its JobBase's default, which FederatedLearning never
// sets) and ownerName "sedna" from a joint inference worker (JOB_NAME's
// default, where a service has SERVICE_NAME), and Sedna's LocalController
// takes both. Where the worker is a pod of more than one object at addr, the
// body's owner chooses among them, then its namespace; a choice left open is
// refused: reason says why.
func (s *Server) ownerOf(info *edgeproto.WorkerInfo, worker string, addr netip.Addr) (key store.Key, reason string, err error) {
	var candidates []store.Key
	for _, k := range s.owners.WorkerOwners(worker) {
		if edgeproto.OwnerKindOf(k.Kind) == "" {
			continue // not a kind whose workers report
		}
		workers, found, err := s.owners.GetWorkers(k)
		if err != nil {
			return store.Key{}, "", err
		}
		if found && edgeproto.Admits(workers, worker, addr) {
			candidates = append(candidates, k)
		}
	}
	said := store.Key{Kind: info.OwnerKind.APIKind(), Namespace: info.Namespace, Name: info.OwnerName}
	if slices.Contains(candidates, said) {
		return said, "", nil
	}
	if len(candidates) > 1 {
		inNamespace := slices.DeleteFunc(slices.Clone(candidates), func(k store.Key) bool { return k.Namespace != info.Namespace })
		if len(inNamespace) == 1 {
			return inNamespace[0], "", nil
		}
	}
	switch len(candidates) {
	case 0:
		// One answer for an object the node does not hold, a name that is
		// not its pod and a pod at another address, so that a caller cannot
		// probe which objects the node holds.
		return store.Key{}, fmt.Sprintf("worker %s is not a pod on this node at %s of any job or service this node holds "+
			"(or this node has not heard of it yet, or it was deleted)", worker, addr), nil
	case 1:
		return candidates[0], "", nil
	}
	names := make([]string, len(candidates))
	for i, k := range candidates {
		names[i] = k.String()
	}
	slices.Sort(names)
	return store.Key{}, fmt.Sprintf("worker %s at %s is a pod of %s on this node: say which in the body's ownerKind, namespace and ownerName",
		worker, addr, strings.Join(names, ", ")), nil
}
