package common

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// SetJobCondition sets the condition of c's type, keeping one entry per type.
// Times move only when something about the condition changed, so a sync that
// changes nothing writes nothing.
func SetJobCondition(conds []sednav1.JobCondition, c sednav1.JobCondition, now metav1.Time) []sednav1.JobCondition {
	out, _ := setJobCondition(conds, c, now)
	return out
}

// SetJobConditionIn is SetJobCondition on *conds, saying whether anything
// changed.
func SetJobConditionIn(conds *[]sednav1.JobCondition, c sednav1.JobCondition, now metav1.Time) bool {
	var changed bool
	*conds, changed = setJobCondition(*conds, c, now)
	return changed
}

func setJobCondition(conds []sednav1.JobCondition, c sednav1.JobCondition, now metav1.Time) ([]sednav1.JobCondition, bool) {
	for i := range conds {
		old := &conds[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			return conds, false
		}
		c.LastHeartbeatTime = now
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		out := append([]sednav1.JobCondition(nil), conds...)
		out[i] = c
		return out, true
	}
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	return append(append([]sednav1.JobCondition(nil), conds...), c), true
}

// FindJobCondition returns the condition of a type, or nil.
func FindJobCondition(conds []sednav1.JobCondition, condType string) *sednav1.JobCondition {
	for i := range conds {
		if conds[i].Type == condType {
			return &conds[i]
		}
	}
	return nil
}

// IsJobConditionTrue says whether the condition of a type is there and True.
func IsJobConditionTrue(conds []sednav1.JobCondition, condType string) bool {
	c := FindJobCondition(conds, condType)
	return c != nil && c.Status == corev1.ConditionTrue
}

// JobConditionFor builds a condition for the owner's current generation.
func JobConditionFor(owner metav1.Object, condType string, status bool, reason, message string) sednav1.JobCondition {
	s := corev1.ConditionFalse
	if status {
		s = corev1.ConditionTrue
	}
	return sednav1.JobCondition{
		Type: condType, Status: s, Reason: reason, Message: message,
		ObservedGeneration: owner.GetGeneration(),
	}
}

// HasJobCondition says whether the condition of a type has this status and message.
func HasJobCondition(conds []sednav1.JobCondition, condType string, status corev1.ConditionStatus, message string) bool {
	c := FindJobCondition(conds, condType)
	return c != nil && c.Status == status && c.Message == message
}

// ConditionReferencesResolved is the condition type that says whether every
// Model and Dataset an object names exists.
const ConditionReferencesResolved = "ReferencesResolved"

// SetReferencesResolved records in conds whether the objects owner names exist
// (missing lists those that do not, as "Model x"). It returns the warning to
// record when it newly reports something missing, so the user hears it once.
func SetReferencesResolved(owner metav1.Object, conds []sednav1.JobCondition, missing []string, now metav1.Time) ([]sednav1.JobCondition, []Event) {
	if len(missing) == 0 {
		return SetJobCondition(conds, JobConditionFor(owner, ConditionReferencesResolved, true, "Resolved",
			"every object it names exists"), now), nil
	}
	msg := fmt.Sprintf("waiting for %s: not found in namespace %s", strings.Join(missing, ", "), owner.GetNamespace())
	var events []Event
	if !HasJobCondition(conds, ConditionReferencesResolved, corev1.ConditionFalse, msg) {
		events = []Event{{Type: corev1.EventTypeWarning, Reason: "MissingReference", Message: msg}}
	}
	return SetJobCondition(conds, JobConditionFor(owner, ConditionReferencesResolved, false, "MissingReference", msg), now), events
}

// MaxConditionMessage is the most bytes a metav1.Condition's message may
// hold; the API server refuses a status write with a longer one.
const MaxConditionMessage = 32768

// ClipConditionMessage returns msg, cut to MaxConditionMessage bytes (and
// marked as cut) when it is longer.
func ClipConditionMessage(msg string) string {
	return ClipText(msg, MaxConditionMessage)
}

// ClipText returns s, or when it is longer than limit bytes, its beginning cut
// at a character boundary and followed by TruncatedSuffix, limit bytes at most
// in all: a status field of bounded size that shows it was cut.
func ClipText(s string, limit int) string {
	return edgeproto.Clip(s, limit, sednav1.TruncatedSuffix)
}

// ReasonEdgeLinkDown is the reason of a condition that would say all is
// well (a job's workers all running, a service Ready) while the owner's
// EdgeLinked condition says a node it needs has no LocalController
// connected.
const ReasonEdgeLinkDown = "EdgeLinkDown"

// AllWellUnlessLinkDown is the condition of condType saying all is well
// (reason, message), unless conds hold an EdgeLinked condition that is
// False (the edge hub's): then it is Unknown, with reason EdgeLinkDown and
// that condition's message, since the cloud knows the workers there only
// as they were when it last heard from their node.
func AllWellUnlessLinkDown(owner metav1.Object, conds []sednav1.JobCondition, condType, reason, message string) sednav1.JobCondition {
	c := JobConditionFor(owner, condType, true, reason, message)
	if l := FindJobCondition(conds, links.ConditionEdgeLinked); l != nil && l.Status == corev1.ConditionFalse {
		c.Status, c.Reason = corev1.ConditionUnknown, ReasonEdgeLinkDown
		c.Message = ClipConditionMessage(message + " as the cloud last heard, but " + l.Message)
	}
	return c
}

// ConditionDatasetsReadable is the condition type that says whether the
// LocalControllers of a job's Datasets could read their index files, as
// each Dataset's own Readable condition says.
const ConditionDatasetsReadable = "DatasetsReadable"

// DatasetReadable is the Dataset condition (datasetstatus.ConditionReadable)
// ConditionDatasetsReadable reads.
const DatasetReadable = "Readable"

// SetDatasetsReadable records in conds whether the Datasets owner names
// could be read: False, with the reason of the first unreadable one and each
// one's message, while any is unreadable; True once all that were read are;
// unchanged while none has been read yet. It
// returns the warning to record when it newly says one is unreadable.
func SetDatasetsReadable(owner metav1.Object, conds []sednav1.JobCondition, datasets []*sednav1.Dataset, now metav1.Time) ([]sednav1.JobCondition, []Event) {
	var reason string
	var whys []string
	known := false
	for _, d := range datasets {
		if d == nil {
			continue
		}
		c := apimeta.FindStatusCondition(d.Status.Conditions, DatasetReadable)
		if c == nil {
			continue
		}
		known = true
		if c.Status == metav1.ConditionFalse {
			if reason == "" {
				reason = c.Reason
			}
			whys = append(whys, fmt.Sprintf("Dataset %s: %s", d.Name, c.Message))
		}
	}
	if len(whys) == 0 {
		if !known {
			return conds, nil
		}
		return SetJobCondition(conds, JobConditionFor(owner, ConditionDatasetsReadable, true, "Readable",
			"the LocalControllers read every Dataset it names"), now), nil
	}
	msg := ClipConditionMessage(strings.Join(whys, "; "))
	var events []Event
	if !HasJobCondition(conds, ConditionDatasetsReadable, corev1.ConditionFalse, msg) {
		events = []Event{{Type: corev1.EventTypeWarning, Reason: reason, Message: msg}}
	}
	return SetJobCondition(conds, JobConditionFor(owner, ConditionDatasetsReadable, false, reason, msg), now), events
}
