package common

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels every child of a Nereid controller carries. The owner's UID selects
// the children (names are reused after a delete, UIDs are not).
const (
	LabelOwnerUID     = "nereid.io/owner-uid"
	LabelOwnerKind    = "nereid.io/owner-kind"
	LabelOwnerName    = "nereid.io/owner-name"
	LabelWorkerRole   = "nereid.io/worker-role"
	LabelTemplateHash = "nereid.io/template-hash"
)

// OwnerLabels are the labels that tie a child to its owner. kind is the
// lower-case kind, as Sedna's ownerKind.
func OwnerLabels(owner metav1.Object, kind string) map[string]string {
	l := map[string]string{
		LabelOwnerUID:  string(owner.GetUID()),
		LabelOwnerKind: kind,
	}
	// A name longer than a label value is still findable by UID.
	if len(validation.IsValidLabelValue(owner.GetName())) == 0 {
		l[LabelOwnerName] = owner.GetName()
	}
	return l
}

// OwnerSelector selects the children of owner.
func OwnerSelector(owner metav1.Object) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelOwnerUID: string(owner.GetUID())})
}

// Hash is a short, stable digest of what a worker is built from, used in its
// name and its template-hash label: a change of any input is a new worker.
func Hash(inputs ...any) (string, error) {
	h := fnv.New64a()
	for _, in := range inputs {
		b, err := json.Marshal(in)
		if err != nil {
			return "", fmt.Errorf("hashing %T: %w", in, err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum64()))[:10], nil
}

// IsControlledBy says whether obj's controller reference is owner, by UID.
func IsControlledBy(obj, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// Claim keeps the objects whose controller is owner. Listing by the owner-uid
// label finds candidates; the controllerRef's UID decides.
func Claim[T metav1.Object](owner metav1.Object, objs []T) []T {
	var mine []T
	for _, o := range objs {
		if IsControlledBy(o, owner) {
			mine = append(mine, o)
		}
	}
	return mine
}

// ByName maps objects by name, as a sync finds the children it wants.
func ByName[T metav1.Object](objs []T) map[string]T {
	m := make(map[string]T, len(objs))
	for _, o := range objs {
		m[o.GetName()] = o
	}
	return m
}

// LowerKind is the lower-case kind, as Sedna's ownerKind and Nereid's owner-kind label.
func LowerKind(gvk schema.GroupVersionKind) string {
	return strings.ToLower(gvk.Kind)
}

func fnvSum(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// ChildName joins an owner's name and a suffix into a child name that is a
// valid DNS label (63 characters at most, as Service names and pod hostnames
// must be): a long owner name is cut and made unique again with its digest.
func ChildName(owner string, suffix ...string) string {
	tail := strings.Join(suffix, "-")
	name := owner + "-" + tail
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	digest := rand.SafeEncodeString(fmt.Sprint(fnvSum(owner)))[:8]
	keep := validation.DNS1123LabelMaxLength - len(tail) - len(digest) - 2
	if keep < 1 {
		keep = 1
	}
	return strings.TrimRight(owner[:keep], "-.") + "-" + digest + "-" + tail
}
