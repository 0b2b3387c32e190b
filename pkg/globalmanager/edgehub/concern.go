package edgehub

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// objects is a set of sedna.io objects, as the informers' caches hold them.
type objects struct {
	datasets               []*sednav1.Dataset
	models                 []*sednav1.Model
	federatedLearningJobs  []*sednav1.FederatedLearningJob
	jointInferenceServices []*sednav1.JointInferenceService
	incrementalJobs        []*sednav1.IncrementalLearningJob
	lifelongJobs           []*sednav1.LifelongLearningJob
}

// concerning returns the objects of objs that concern node, by ref: those an
// edge node's LocalController needs because it runs, or may run, a worker of
// them, and the Datasets and Models those name.
//
//   - a FederatedLearningJob whose aggregation worker or any training worker
//     template has spec.nodeName node;
//   - a JointInferenceService whose edge or cloud worker template has
//     spec.nodeName node;
//   - an Incremental- or LifelongLearningJob whose Dataset (in objs, same
//     namespace) is on node, or any of whose stage templates names node;
//   - a Dataset whose spec.nodeName is node;
//   - a Model (in objs) that an object above names.
//
// It is pure: objs may hold more than concerns node (the hub passes the
// candidates its indexes find), and what is missing from objs (a Dataset or
// Model not yet created) concerns nothing.
func concerning(node string, objs objects) map[edgeproto.ObjectRef]metav1.Object {
	out := make(map[edgeproto.ObjectRef]metav1.Object)
	if node == "" {
		return out
	}
	datasetNode := make(map[nsName]string, len(objs.datasets))
	for _, d := range objs.datasets {
		datasetNode[nsName{d.Namespace, d.Name}] = d.Spec.NodeName
		if d.Spec.NodeName == node {
			out[refOf(sednav1.DatasetKind.Kind, d)] = d
		}
	}
	wanted := make(map[nsName]bool) // models named by what concerns node
	add := func(kind string, obj metav1.Object, models []string) {
		out[refOf(kind, obj)] = obj
		for _, m := range models {
			wanted[nsName{obj.GetNamespace(), m}] = true
		}
	}
	for _, j := range objs.federatedLearningJobs {
		if onNode(node, templatesOfFederated(j)) {
			add(sednav1.FederatedLearningJobKind.Kind, j, j.ModelNames())
		}
	}
	for _, s := range objs.jointInferenceServices {
		if onNode(node, templatesOfJointInference(s)) {
			add(sednav1.JointInferenceServiceKind.Kind, s, s.ModelNames())
		}
	}
	for _, j := range objs.incrementalJobs {
		if datasetNode[nsName{j.Namespace, j.Spec.Dataset.Name}] == node || onNode(node, templatesOfIncremental(j)) {
			add(sednav1.IncrementalLearningJobKind.Kind, j, j.ModelNames())
		}
	}
	for _, j := range objs.lifelongJobs {
		if datasetNode[nsName{j.Namespace, j.Spec.Dataset.Name}] == node || onNode(node, templatesOfLifelong(j)) {
			add(sednav1.LifelongLearningJobKind.Kind, j, nil)
		}
	}
	for _, m := range objs.models {
		if wanted[nsName{m.Namespace, m.Name}] {
			out[refOf(sednav1.ModelKind.Kind, m)] = m
		}
	}
	return out
}

// nsName is a namespace and a name.
type nsName struct{ namespace, name string }

func refOf(kind string, obj metav1.Object) edgeproto.ObjectRef {
	return edgeproto.ObjectRef{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// onNode reports whether any of templates is pinned to node.
func onNode(node string, templates []*corev1.PodTemplateSpec) bool {
	for _, t := range templates {
		if t.Spec.NodeName == node {
			return true
		}
	}
	return false
}

// nodesOf are the nodes templates are pinned to, without duplicates.
func nodesOf(templates []*corev1.PodTemplateSpec) []string {
	var nodes []string
	for _, t := range templates {
		if n := t.Spec.NodeName; n != "" && !contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func templatesOfFederated(j *sednav1.FederatedLearningJob) []*corev1.PodTemplateSpec {
	ts := []*corev1.PodTemplateSpec{&j.Spec.AggregationWorker.Template}
	for i := range j.Spec.TrainingWorkers {
		ts = append(ts, &j.Spec.TrainingWorkers[i].Template)
	}
	return ts
}

func templatesOfJointInference(s *sednav1.JointInferenceService) []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&s.Spec.EdgeWorker.Template, &s.Spec.CloudWorker.Template}
}

func templatesOfIncremental(j *sednav1.IncrementalLearningJob) []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template}
}

func templatesOfLifelong(j *sednav1.LifelongLearningJob) []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&j.Spec.TrainSpec.Template, &j.Spec.EvalSpec.Template, &j.Spec.DeploySpec.Template}
}
