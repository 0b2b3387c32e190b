package realnode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
)

// Label is the label up gives every real node: nereid.io/real-node=true.
const Label = "nereid.io/real-node"

// DIMockAggregator is the container of the learner aggregator
// DI-orchestrator's mock coordinator waits for at its default
// KUBERNETES_AGGREGATOR_URL, localhost:12334: the mock's own (main.py
// aggregator), its slave on that port, its master (which its learners call
// back) on the pod's address.
func DIMockAggregator(image string) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{
		Name: "aggregator", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, RestartPolicy: &always,
		Command: []string{"/bin/bash", "-c", "exec python3 -u main.py aggregator -sl localhost -sp 12334 -ml $HOSTNAME -mp 12335"},
	}
}

// DIMockJob changes DI-orchestrator's di-mock-dijob.yaml (job) to run on the
// real nodes here, in three ways, each because of this machine or of
// DI-orchestrator v0.2.2 itself:
//   - every pod's imagePullPolicy is IfNotPresent: nothing can be pulled
//     here; the image it names is hack/workerimage's di-mock, imported into
//     the nodes under that name;
//   - every pod runs on a real node (nodeSelector nereid.io/real-node=true),
//     not on kwok's, which run nothing;
//   - the coordinator's pod gets the mock's own learner aggregator as a
//     native sidecar (an init container that always restarts, so the pod
//     succeeds when the coordinator exits). The mock's coordinator connects
//     to an aggregator at KUBERNETES_AGGREGATOR_URL (default localhost:12334)
//     before anything else and exits 1 after 120 s without one; the
//     nervex-operator it was written for made an aggregator with every
//     coordinator and set that variable, DI-orchestrator v0.2.2 makes
//     aggregators only for learners of more than one GPU and sets it nowhere
//     (common/const.go names it, nothing reads it), so under v0.2.2 too the
//     sample as shipped never runs.
func DIMockJob(job *div1.DIJob) error {
	if job.Spec.Coordinator == nil {
		return fmt.Errorf("DIJob %s has no coordinator", job.Name)
	}
	templates := []*corev1.PodTemplateSpec{&job.Spec.Coordinator.Template}
	if job.Spec.Collector != nil {
		templates = append(templates, &job.Spec.Collector.Template)
	}
	if job.Spec.Learner != nil {
		templates = append(templates, &job.Spec.Learner.Template)
	}
	for _, t := range templates {
		if t.Spec.NodeSelector == nil {
			t.Spec.NodeSelector = map[string]string{}
		}
		t.Spec.NodeSelector[Label] = "true"
		for i := range t.Spec.Containers {
			t.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	coordinator := &job.Spec.Coordinator.Template.Spec
	if len(coordinator.Containers) == 0 {
		return fmt.Errorf("DIJob %s's coordinator has no container", job.Name)
	}
	coordinator.InitContainers = append(coordinator.InitContainers, DIMockAggregator(coordinator.Containers[0].Image))
	return nil
}

// DIMockJobYAML is DIMockJob of the DIJob in data (YAML), as YAML.
func DIMockJobYAML(data []byte) ([]byte, error) {
	var job div1.DIJob
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		return nil, fmt.Errorf("reading the DIJob: %w", err)
	}
	if err := DIMockJob(&job); err != nil {
		return nil, err
	}
	return yaml.Marshal(&job)
}
