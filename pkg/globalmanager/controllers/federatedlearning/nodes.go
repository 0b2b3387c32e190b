package federatedlearning

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// condOnDatasetNodes says whether every training worker runs on its
// Dataset's node: a trainer reads its Dataset's path on its own node and
// reports to its own node's LocalController, so one elsewhere trains on
// another node's data and reports where the job's dataset is not.
const condOnDatasetNodes = "OnDatasetNodes"

// trainerNode is where one training worker runs against its Dataset's node.
type trainerNode struct {
	worker      int
	dataset     string
	datasetNode string
	// named is the node the worker's template names ("" for none).
	named string
}

// placed is true when the template names no node and the Dataset has one:
// the worker is placed on the Dataset's node.
func (n trainerNode) placed() bool { return n.named == "" && n.datasetNode != "" }

// differs is true when the template names a node other than the Dataset's.
func (n trainerNode) differs() bool {
	return n.named != "" && n.datasetNode != "" && n.named != n.datasetNode
}

// trainerNodes are the nodes of the job's training workers, in order.
// refs must be complete.
func trainerNodes(job *sednav1.FederatedLearningJob, refs references) []trainerNode {
	out := make([]trainerNode, len(job.Spec.TrainingWorkers))
	for i := range job.Spec.TrainingWorkers {
		tw := &job.Spec.TrainingWorkers[i]
		out[i] = trainerNode{
			worker: i, dataset: tw.Dataset.Name, datasetNode: refs.datasets[i].Spec.NodeName,
			named: placement.PinnedNode(&corev1.Pod{Spec: tw.Template.Spec}),
		}
	}
	return out
}

// onDatasetNode returns the template a training worker's pod is made from:
// t itself, or, when the template names no node, a copy that runs on its
// Dataset's node (Sedna takes the node from the template alone). A template
// that places the pod nowhere gets spec.nodeName, as Sedna's own templates
// set it; one with its own selectors or affinity keeps them and requires
// the node beside them.
func onDatasetNode(t *corev1.PodTemplateSpec, n trainerNode) *corev1.PodTemplateSpec {
	if !n.placed() {
		return t
	}
	t = t.DeepCopy()
	s := &t.Spec
	if len(s.NodeSelector) == 0 && s.Affinity == nil {
		s.NodeName = n.datasetNode
	} else {
		s.Affinity = common.Pin(s.Affinity, n.datasetNode)
	}
	return t
}

// setOnDatasetNodes sets the OnDatasetNodes condition (False when a
// template names a node other than its Dataset's), with a Warning event for
// the trainers elsewhere and a Normal one for those Nereid placed on their
// Dataset's node, when what the condition says changes.
func setOnDatasetNodes(job *sednav1.FederatedLearningJob, status *sednav1.FederatedLearningJobStatus, nodes []trainerNode, now metav1.Time) []common.Event {
	var placed, differ []string
	for _, n := range nodes {
		switch {
		case n.placed():
			placed = append(placed, fmt.Sprintf("trainingWorkers[%d] runs on node %s, its Dataset %s's: its template names no node",
				n.worker, n.datasetNode, n.dataset))
		case n.differs():
			differ = append(differ, fmt.Sprintf("trainingWorkers[%d]'s template names node %s, but its Dataset %s is on node %s: "+
				"the worker reads node %s's copy of the dataset's path and reports to node %s's LocalController",
				n.worker, n.named, n.dataset, n.datasetNode, n.named, n.named))
		}
	}
	var events []common.Event
	if len(differ) > 0 {
		events = append(events, common.Event{Type: corev1.EventTypeWarning, Reason: "NodeDiffersFromDataset", Message: strings.Join(differ, "; ")})
	}
	if len(placed) > 0 {
		events = append(events, common.Event{Type: corev1.EventTypeNormal, Reason: "PlacedOnDatasetNode", Message: strings.Join(placed, "; ")})
	}
	var cond sednav1.JobCondition
	switch msg := common.ClipConditionMessage(strings.Join(append(differ, placed...), "; ")); {
	case len(differ) > 0:
		cond = common.JobConditionFor(job, condOnDatasetNodes, false, "NodeDiffersFromDataset", msg)
	case len(placed) > 0:
		cond = common.JobConditionFor(job, condOnDatasetNodes, true, "PlacedOnDatasetNode", msg)
	default:
		cond = common.JobConditionFor(job, condOnDatasetNodes, true, "OnDatasetNodes", "every training worker's template names its Dataset's node")
	}
	if common.HasJobCondition(status.Conditions, condOnDatasetNodes, cond.Status, cond.Message) {
		events = nil
	}
	status.Conditions = common.SetJobCondition(status.Conditions, cond, now)
	return events
}
