package dijob

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// What DI-engine's workers and DI-orchestrator's tools read on a pod.
const (
	LabelJob      = "diengine/job"
	LabelTaskType = "diengine/task-type"
	LabelTaskName = "diengine/task-name"
	LabelPod      = "diengine/pod"

	// AnnotationReplicas is how many names the pod's DI_NODES lists.
	AnnotationReplicas = "diengine/replicas"
	// AnnotationRank is the pod's global rank (DI_RANK): its place in
	// DI_NODES, kept for the pod's life (ranks.go).
	AnnotationRank = "diengine/rank"
	// AnnotationTaskRank is the pod's rank within its task (the end of its name).
	AnnotationTaskRank = "diengine/task-rank"
	// AnnotationNode is the node the allocator placed the pod on.
	AnnotationNode = "diengine/node"

	// Port is where DI-engine workers listen, the headless Service's port.
	Port     = 22270
	portName = "di-port"
)

// replica is one pod a job's spec asks for.
type replica struct {
	task     *div2.Task
	taskName string
	// taskRank is the rank within the task; index the replica's place in
	// the spec: tasks in spec order, each task's replicas in rank order
	// (the allocator's order; the rank in DI_NODES is given by ranks.go).
	taskRank, index int
	name            string
}

// replicasOf lists the replicas of the job's current spec in spec order.
func replicasOf(job *div2.DIJob) []replica {
	var out []replica
	for i := range job.Spec.Tasks {
		t := &job.Spec.Tasks[i]
		for r := range int(job.TaskReplicas(i)) {
			out = append(out, replica{task: t, taskName: t.TaskName(), taskRank: r, index: len(out), name: PodName(job.Name, t.TaskName(), r)})
		}
	}
	return out
}

// RankOf is the pod's global rank, as its diengine/rank annotation says.
func RankOf(pod *corev1.Pod) (int, bool) {
	r, err := strconv.Atoi(pod.Annotations[AnnotationRank])
	return r, err == nil && r >= 0
}

// PodName is the name of a task's replica: <job>-<task>-<rank>, also its
// hostname, so at most a DNS label long (a long job name is cut and made
// unique with a digest).
func PodName(job, task string, rank int) string {
	return common.ChildName(job, task, strconv.Itoa(rank))
}

// ServiceName is the job's headless Service, the pods' subdomain: di-<job>.
func ServiceName(job string) string {
	name := "di-" + job
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	// ChildName keeps a suffix; the Service's prefix is the same "di" part,
	// put at the end, digest-qualified.
	return common.ChildName(job, "di")
}

// fqdn is how the other replicas reach r.
func (c *Controller) fqdn(job *div2.DIJob, r replica) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", r.name, ServiceName(job.Name), job.Namespace, c.config.ClusterDomain)
}

// envName is DI_<TASK NAME>_NODES: upper case, '-' as '_'.
func envName(task string) string {
	return "DI_" + strings.ToUpper(strings.ReplaceAll(task, "-", "_")) + "_NODES"
}

// taskHashes is, per task name, the digest of what its pods are built from:
// the task's type and template and the job's volumes. A change of any of them
// replaces the task's pods; a change of replicas does not (DI_NODES is fixed
// at a pod's start, see docs/dijob.md).
func taskHashes(job *div2.DIJob) (map[string]string, error) {
	out := map[string]string{}
	for i := range job.Spec.Tasks {
		t := &job.Spec.Tasks[i]
		h, err := common.Hash(t.Type, t.Template, job.Spec.Volumes)
		if err != nil {
			return nil, err
		}
		out[t.TaskName()] = h
	}
	return out, nil
}

// nodesEnv is the environment every pod made from table shares after its
// rank: DI_NODES, each task's DI_<TASK>_NODES and DI_SERVER_URL. It is
// built once per sync that makes pods.
func (c *Controller) nodesEnv(table *rankTable) []corev1.EnvVar {
	env := []corev1.EnvVar{common.Env(envNodes, strings.Join(table.nodes, ","))}
	for _, t := range table.order {
		env = append(env, common.Env(envName(t), strings.Join(table.tasks[t], ",")))
	}
	if c.config.ServerURL != "" {
		env = append(env, common.Env("DI_SERVER_URL", c.config.ServerURL))
	}
	return env
}

// newPod builds the pod of replica r at rank, its DI_NODES listing total
// names, shared being the job's nodesEnv.
func (c *Controller) newPod(job *div2.DIJob, r replica, rank, total int, shared []corev1.EnvVar, hash string) *corev1.Pod {
	env := append([]corev1.EnvVar{
		common.Env("DI_JOB_ID", job.Namespace+"/"+job.Name),
		common.Env("DI_RANK", strconv.Itoa(rank)),
	}, shared...)
	pod := common.NewWorkerPod(job, jobKind, common.Worker{
		Name: r.name, Role: string(r.task.Type), Hash: hash, Template: &r.task.Template, Env: env,
	})
	pod.Labels = common.MergeLabels(pod.Labels, map[string]string{
		LabelTaskType: string(r.task.Type),
		LabelTaskName: r.taskName,
	}, jobLabel(job), podLabel(r.name))
	pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{
		AnnotationReplicas: strconv.Itoa(total),
		AnnotationRank:     strconv.Itoa(rank),
		AnnotationTaskRank: strconv.Itoa(r.taskRank),
	})
	if allocator.SelectsEdge(&pod.Spec) {
		allocator.TolerateLinkLoss(&pod.Spec, c.config.EdgeLinkGrace)
	}
	c.addServerCredentials(pod)
	pod.Spec.Hostname = r.name
	pod.Spec.Subdomain = ServiceName(job.Name)
	// DI-engine's workers do not resume; the controller restarts the job.
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	// The job's volumes, where the template has none of that name.
	for _, v := range job.Spec.Volumes {
		if !hasVolume(pod.Spec.Volumes, v.Name) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, *v.DeepCopy())
		}
	}
	return pod
}

func hasVolume(vols []corev1.Volume, name string) bool {
	for _, v := range vols {
		if v.Name == name {
			return true
		}
	}
	return false
}

// jobLabel is diengine/job, when the job's name fits a label value (a longer
// name is still found by the owner's UID).
func jobLabel(job *div2.DIJob) map[string]string {
	if len(validation.IsValidLabelValue(job.Name)) > 0 {
		return nil
	}
	return map[string]string{LabelJob: job.Name}
}

func podLabel(name string) map[string]string {
	return map[string]string{LabelPod: name}
}

// headlessService is the Service that gives each replica its DNS name.
func headlessService(job *div2.DIJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ServiceName(job.Name),
			Namespace:       job.Namespace,
			Labels:          common.MergeLabels(common.OwnerLabels(job, common.LowerKind(jobKind)), jobLabel(job)),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{common.LabelOwnerUID: string(job.UID)},
			// Replicas find one another before they are ready: a learner
			// waits for collectors that wait for it.
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: portName, Port: Port}},
		},
	}
}
