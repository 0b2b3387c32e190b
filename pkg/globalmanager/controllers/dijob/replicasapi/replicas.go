package replicasapi

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// portName names the container port a replica listens on (DI's
// DefaultPortName); without one, Config.Port.
const portName = "di-port"

// replica is one entry of a GET replicas answer.
type replica struct {
	rank int
	pod  *corev1.Pod
}

// getReplicas answers the job's replicas in global rank order: "ip:port",
// or the pod's DNS name and port while it has no IP.
func (s *Server) getReplicas(ctx context.Context, job *div2alpha1.DIJob) *reply {
	pods, err := common.ListOwned[*corev1.Pod](s.cfg.Pods, job)
	if err != nil {
		return internal(fmt.Errorf("listing the pods of DIJob %s: %w", klog.KObj(job), err), "the DIJob's pods could not be listed")
	}
	// The rank of a replica is the one it was made with, which it keeps
	// (its DI_RANK); a scale leaves other pods' ranks where they were.
	replicas := make([]replica, 0, len(pods))
	for _, pod := range pods {
		if !isLiveReplicaOf(pod, job) {
			continue
		}
		rank, ok := dijob.RankOf(pod)
		if !ok {
			klog.FromContext(ctx).V(4).Info("Pod of a DIJob without a rank", "pod", klog.KObj(pod))
			continue
		}
		replicas = append(replicas, replica{rank: rank, pod: pod})
	}
	// One entry per rank: should two pods claim one (they should not), the
	// one with an IP, then the older, then the first by name.
	slices.SortFunc(replicas, func(a, b replica) int {
		return cmp.Or(
			cmp.Compare(a.rank, b.rank),
			compareBool(b.pod.Status.PodIP != "", a.pod.Status.PodIP != ""),
			a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time),
			strings.Compare(a.pod.Name, b.pod.Name),
		)
	})
	addresses := make([]string, 0, len(replicas))
	for i, r := range replicas {
		if i > 0 && replicas[i-1].rank == r.rank {
			continue
		}
		addresses = append(addresses, s.address(r.pod, job))
	}
	return ok("successfully get replicas", addresses)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// isLiveReplicaOf reports whether pod is a replica of job that serves or
// will: controlled by job, not being deleted, not finished.
func isLiveReplicaOf(pod *corev1.Pod, job *div2alpha1.DIJob) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	return ref != nil && ref.UID == job.UID &&
		pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// address is where a replica listens: its IP, or while it has none its DNS
// name behind the job's headless Service, and its port.
func (s *Server) address(pod *corev1.Pod, job *div2alpha1.DIJob) string {
	port := s.cfg.Port
	for _, c := range pod.Spec.Containers {
		if i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == portName }); i >= 0 {
			port = c.Ports[i].ContainerPort
			break
		}
	}
	host := pod.Status.PodIP
	if host == "" {
		hostname, subdomain := cmp.Or(pod.Spec.Hostname, pod.Name), cmp.Or(pod.Spec.Subdomain, "di-"+job.Name)
		host = strings.Join([]string{hostname, subdomain, pod.Namespace, s.cfg.ServiceDomain}, ".")
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// scaleRequest is DI's DIJobRequest, with the task to scale.
type scaleRequest struct {
	// Replicas is how many to add or remove; a pointer, so that a body
	// without it is refused rather than taken for 0.
	Replicas *int64 `json:"replicas"`
	// Task names the task; the job's collector task when empty.
	Task string `json:"task,omitempty"`
}

// scale adds (POST) or removes (DELETE) replicas of one task of job by
// updating its spec, and answers the task's pod names after the change.
func (s *Server) scale(ctx context.Context, w http.ResponseWriter, r *http.Request, job *div2alpha1.DIJob, act action) *reply {
	var req scaleRequest
	if rep := s.readJSON(w, r, &req); rep != nil {
		return rep
	}
	limit := int64(s.cfg.MaxReplicasPerTask)
	switch {
	case req.Replicas == nil:
		return fail(http.StatusBadRequest, `the request body needs "replicas", how many replicas to add or remove`)
	case *req.Replicas < 1 || *req.Replicas > limit:
		return fail(http.StatusBadRequest, `"replicas" must be between 1 and %d, not %d`, limit, *req.Replicas)
	case req.Task != "" && len(validation.IsDNS1123Label(req.Task)) > 0:
		return fail(http.StatusBadRequest, `"task" must be the name of one of the job's tasks`)
	}
	if rep := s.writeTurn(ctx); rep != nil {
		return rep
	}
	delta := *req.Replicas
	message, failure := "successfully add replicas", "the replicas could not be added"
	if act == actionDeleteReplicas {
		delta, message, failure = -delta, "successfully delete replicas", "the replicas could not be removed"
	}

	var refusal *reply
	var names []string
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.latest(ctx, job, attempt)
		attempt++
		if err != nil {
			return err
		}
		if refusal = scalable(cur, job); refusal != nil {
			return nil
		}
		i, rep := collectorOrNamed(cur, req.Task)
		if rep != nil {
			refusal = rep
			return nil
		}
		task := cur.Spec.Tasks[i].TaskName()
		have := int64(max(cur.TaskReplicas(i), 1)) // 0 is the API's default, 1
		want := have + delta
		switch {
		case want < 1:
			refusal = fail(http.StatusConflict, "task %q of DIJob %s has %d replicas: removing %d would leave %d, and a task keeps at least 1",
				task, klog.KObj(cur), have, -delta, want)
			return nil
		case want > limit:
			refusal = fail(http.StatusConflict, "task %q of DIJob %s has %d replicas: adding %d would make %d, over the limit of %d per task",
				task, klog.KObj(cur), have, delta, want, limit)
			return nil
		}
		update := cur.DeepCopy()
		if len(update.Spec.Tasks) == 1 && update.Spec.Replicas != nil {
			// The scale subresource's field wins on a job of one task.
			*update.Spec.Replicas = int32(want)
		} else {
			update.Spec.Tasks[i].Replicas = int32(want)
		}
		if err := update.CheckReplicas(); err != nil && delta > 0 {
			// The CRD would refuse it (400); the job's state does (409).
			refusal = fail(http.StatusConflict, "task %q of DIJob %s has %d replicas: adding %d would be too many: %v",
				task, klog.KObj(cur), have, delta, err)
			return nil
		}
		if _, err := s.cfg.DI.DiengineV2alpha1().DIJobs(cur.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Scaled a DIJob's task", "dijob", klog.KObj(cur), "task", task, "from", have, "to", want)
		names = podNames(cur.Name, task, int(want))
		return nil
	})
	if refusal != nil {
		return refusal
	}
	if err != nil {
		return writeFailure(err, job, failure)
	}
	return ok(message, names)
}

// latest is the job to change: the cached one at the first attempt, the API
// server's after a conflict.
func (s *Server) latest(ctx context.Context, job *div2alpha1.DIJob, attempt int) (*div2alpha1.DIJob, error) {
	if attempt == 0 {
		return job, nil
	}
	return s.cfg.DI.DiengineV2alpha1().DIJobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
}

// scalable refuses to scale cur when it is not the job that was authorized
// (authorized), or is going, another controller's, finished, preemptible
// or a v1alpha1 job (its
// coordinator asks the v1 replicas server for its replicas; its tasks are
// one of each, whatever their replicas say).
func scalable(cur, authorized *div2alpha1.DIJob) *reply {
	switch {
	case cur.UID != authorized.UID:
		return fail(http.StatusConflict, "DIJob %s was deleted and created again while the request was handled", klog.KObj(cur))
	case cur.DeletionTimestamp != nil:
		return fail(http.StatusConflict, "DIJob %s is being deleted", klog.KObj(cur))
	case !common.RunByNereid(cur):
		return runByAnother(cur)
	case cur.Status.Phase == div2alpha1.JobSucceeded || cur.Status.Phase == div2alpha1.JobFailed:
		return fail(http.StatusConflict, "DIJob %s has finished (%s)", klog.KObj(cur), cur.Status.Phase)
	case cur.Spec.Preemptible:
		return fail(http.StatusConflict, "DIJob %s is preemptible: the allocator sets its replicas", klog.KObj(cur))
	case conversion.IsV1(cur):
		return fail(http.StatusConflict, "DIJob %s is a v1alpha1 job: its coordinator asks the v1 replicas server (/v1alpha1/replicas) for collectors and learners", klog.KObj(cur))
	}
	return nil
}

// collectorOrNamed is the index of the task named name, or of the collector
// task when name is empty: 400 when there is none.
func collectorOrNamed(job *div2alpha1.DIJob, name string) (int, *reply) {
	if name == "" {
		i := slices.IndexFunc(job.Spec.Tasks, func(t div2alpha1.Task) bool { return t.Type == div2alpha1.TaskTypeCollector })
		if i < 0 {
			return -1, fail(http.StatusBadRequest, `DIJob %s has no collector task: name the task to scale in "task"`, klog.KObj(job))
		}
		return i, nil
	}
	i := slices.IndexFunc(job.Spec.Tasks, func(t div2alpha1.Task) bool { return t.TaskName() == name })
	if i < 0 {
		names := make([]string, len(job.Spec.Tasks))
		for j, t := range job.Spec.Tasks {
			names[j] = t.TaskName()
		}
		return -1, fail(http.StatusBadRequest, "DIJob %s has no task %q; its tasks are %s", klog.KObj(job), name, strings.Join(names, ", "))
	}
	return i, nil
}

// podNames are the names of a task's replicas: <job>-<task>-<rank in task>.
func podNames(job, task string, replicas int) []string {
	names := make([]string, replicas)
	for i := range names {
		names[i] = dijob.PodName(job, task, i)
	}
	return names
}
