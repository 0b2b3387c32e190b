package edgehubtest

// The hub's tests run with the kinds the GlobalManager sends to the edge, as
// they register themselves (their packages do not import the hub); these
// build objects of them.
import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/lifelonglearning"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/controllers/protection"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/datasetstatus"
)

// ObjectNamespace is the namespace of the tests' objects.
const ObjectNamespace = "default"

// Meta is the metadata of a test object named name.
func Meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ObjectNamespace, ResourceVersion: "1"}
}

// OnNodeTemplate is a pod template pinned to node ("": none).
func OnNodeTemplate(node string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "w", Image: "w"}}}}
}

// Dataset is a Dataset on node.
func Dataset(name, node string) *sednav1.Dataset {
	return &sednav1.Dataset{ObjectMeta: Meta(name), Spec: sednav1.DatasetSpec{URL: "/data/" + name, Format: "txt", NodeName: node}}
}

// Model is a Model.
func Model(name string) *sednav1.Model {
	return &sednav1.Model{ObjectMeta: Meta(name), Spec: sednav1.ModelSpec{URL: "/models/" + name, Format: "pb"}}
}

// FederatedJob is a FederatedLearningJob with its aggregator on
// aggregationNode and a training worker on each of trainingNodes.
func FederatedJob(name, aggregationNode string, trainingNodes ...string) *sednav1.FederatedLearningJob {
	j := &sednav1.FederatedLearningJob{ObjectMeta: Meta(name)}
	j.Spec.AggregationWorker = sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: name + "-model"}, Template: OnNodeTemplate(aggregationNode)}
	for i, n := range trainingNodes {
		j.Spec.TrainingWorkers = append(j.Spec.TrainingWorkers, sednav1.TrainingWorker{
			Dataset: sednav1.DatasetRef{Name: name + "-data-" + string(rune('0'+i))}, Template: OnNodeTemplate(n)})
	}
	return j
}

// JointService is a JointInferenceService with its workers on edgeNode and
// cloudNode.
func JointService(name, edgeNode, cloudNode string) *sednav1.JointInferenceService {
	s := &sednav1.JointInferenceService{ObjectMeta: Meta(name)}
	s.Spec.EdgeWorker = sednav1.EdgeWorker{Model: sednav1.ModelRef{Name: name + "-small"}, Template: OnNodeTemplate(edgeNode),
		HardExampleMining: sednav1.HardExampleMining{Name: "IBT"}}
	s.Spec.CloudWorker = sednav1.CloudWorker{Model: sednav1.ModelRef{Name: name + "-big"}, Template: OnNodeTemplate(cloudNode)}
	return s
}

// IncrementalJob is an IncrementalLearningJob of datasetName, its train,
// eval and deploy stages pinned to stageNodes.
func IncrementalJob(name, datasetName string, stageNodes ...string) *sednav1.IncrementalLearningJob {
	j := &sednav1.IncrementalLearningJob{ObjectMeta: Meta(name)}
	j.Spec.Dataset = sednav1.CycleDataset{Name: datasetName, TrainProb: 0.8}
	j.Spec.InitialModel = sednav1.ModelRef{Name: name + "-initial"}
	j.Spec.DeploySpec.Model = sednav1.DeployModel{Name: name + "-deploy"}
	j.Spec.EvalSpec.InitialEvalModel = &sednav1.ModelRef{Name: name + "-eval"}
	j.Spec.OutputDir = "/output"
	pinStages(stageNodes, &j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template)
	return j
}

// LifelongJob is a LifelongLearningJob of datasetName, its stages pinned
// to stageNodes.
func LifelongJob(name, datasetName string, stageNodes ...string) *sednav1.LifelongLearningJob {
	j := &sednav1.LifelongLearningJob{ObjectMeta: Meta(name)}
	j.Spec.Dataset = sednav1.CycleDataset{Name: datasetName, TrainProb: 0.8}
	j.Spec.OutputDir = "/output"
	pinStages(stageNodes, &j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template)
	return j
}

// pinStages sets each of a learning cycle's stage templates to one pinned
// to the node of the same rank in nodes (none past its end).
func pinStages(nodes []string, templates ...*corev1.PodTemplateSpec) {
	for i, t := range templates {
		node := ""
		if i < len(nodes) {
			node = nodes[i]
		}
		*t = OnNodeTemplate(node)
	}
}

// ForgedPod carries owner's label on node, but no controller reference.
func ForgedPod(name, owner, node string) *corev1.Pod {
	p := WorkerPod(name, owner, node)
	p.OwnerReferences = nil
	return p
}

// WorkerPod is a worker pod of the object with UID owner, bound to node: it
// carries the owner label and a controller reference to the owner.
func WorkerPod(name, owner, node string) *corev1.Pod {
	controller := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ObjectNamespace, Labels: map[string]string{common.LabelOwnerUID: owner},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "sedna.io/v1alpha1", Kind: "Owner", Name: "owner", UID: types.UID(owner), Controller: &controller}}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}
