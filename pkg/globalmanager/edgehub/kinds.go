package edgehub

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/typed/sedna/v1alpha1"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions/sedna/v1alpha1"
)

// kind is everything the hub knows of one kind of object it sends to edge
// nodes; what it needs of each object it reads through the interfaces below,
// which the API types implement. A new edge kind is one more entry in
// sednaKinds (or a list like it) and those methods on its type: no function
// of the hub switches on kinds.
type kind struct {
	// name is the API kind, as in edgeproto.ObjectRef.Kind.
	name string
	// apiVersion is group/version, put into the objects sent (a cached object
	// has no TypeMeta).
	apiVersion string
	informer   cache.SharedIndexInformer
	// order sends objects of lower order first: Datasets and Models before
	// the jobs that name them.
	order int
	// sendStatus is set for the kinds whose status the LocalController reads
	// (the learning cycles: their stage and round); other kinds are sent
	// without status.
	sendStatus bool
	// workers is set for the kinds whose worker pods report through the
	// LocalController; the hub sends each node the names of the object's pods
	// on it, and accepts reports only from those.
	workers bool
	// ownReports is set for the kinds whose LocalControllers report under
	// their own name (edgeproto.LocalControllerWorker: a learning cycle's
	// round data ready, a model deployed); any other kind refuses the name.
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

// sendsStatus are the kinds whose status the LocalController reads (the
// learning cycles: their stage and round), by API kind.
var sendsStatus = map[string]bool{
	sednav1.IncrementalLearningJobKind.Kind: true,
	sednav1.LifelongLearningJobKind.Kind:    true,
}

// sednaKinds are the sedna.io/v1alpha1 kinds the hub sends; it writes their
// status with client.
func sednaKinds(client sednaclient.SednaV1alpha1Interface, inf sednainformers.Interface) []*kind {
	gv := sednav1.SchemeGroupVersion.String()
	return []*kind{
		{name: sednav1.DatasetKind.Kind, apiVersion: gv, informer: inf.Datasets().Informer(), order: 0,
			conditions: metaConditions(func(o *sednav1.Dataset) *[]metav1.Condition { return &o.Status.Conditions },
				func(ns string) statusUpdater[*sednav1.Dataset] { return client.Datasets(ns) })},
		{name: sednav1.ModelKind.Kind, apiVersion: gv, informer: inf.Models().Informer(), order: 1,
			conditions: metaConditions(func(o *sednav1.Model) *[]metav1.Condition { return &o.Status.Conditions },
				func(ns string) statusUpdater[*sednav1.Model] { return client.Models(ns) })},
		{name: sednav1.FederatedLearningJobKind.Kind, apiVersion: gv, informer: inf.FederatedLearningJobs().Informer(), order: 2, workers: true,
			conditions: jobConditions(func(o *sednav1.FederatedLearningJob) *[]sednav1.JobCondition { return &o.Status.Conditions },
				func(ns string) statusUpdater[*sednav1.FederatedLearningJob] { return client.FederatedLearningJobs(ns) })},
		{name: sednav1.JointInferenceServiceKind.Kind, apiVersion: gv, informer: inf.JointInferenceServices().Informer(), order: 2, workers: true,
			conditions: jobConditions(func(o *sednav1.JointInferenceService) *[]sednav1.JobCondition { return &o.Status.Conditions },
				func(ns string) statusUpdater[*sednav1.JointInferenceService] {
					return client.JointInferenceServices(ns)
				})},
		{name: sednav1.IncrementalLearningJobKind.Kind, apiVersion: gv, informer: inf.IncrementalLearningJobs().Informer(), order: 2,
			workers: true, sendStatus: sendsStatus[sednav1.IncrementalLearningJobKind.Kind], ownReports: true,
			conditions: jobConditions(func(o *sednav1.IncrementalLearningJob) *[]sednav1.JobCondition { return &o.Status.JobConditions },
				func(ns string) statusUpdater[*sednav1.IncrementalLearningJob] {
					return client.IncrementalLearningJobs(ns)
				})},
		{name: sednav1.LifelongLearningJobKind.Kind, apiVersion: gv, informer: inf.LifelongLearningJobs().Informer(), order: 2,
			workers: true, sendStatus: sendsStatus[sednav1.LifelongLearningJobKind.Kind], ownReports: true,
			conditions: jobConditions(func(o *sednav1.LifelongLearningJob) *[]sednav1.JobCondition { return &o.Status.JobConditions },
				func(ns string) statusUpdater[*sednav1.LifelongLearningJob] { return client.LifelongLearningJobs(ns) })},
	}
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
	if m, ok := obj.(modelNamer); ok {
		return nonEmpty(m.ModelNames())
	}
	return nil
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
