package common

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Worker describes one worker pod a controller wants.
type Worker struct {
	// Name of the pod; deterministic, so a repeated create fails with
	// AlreadyExists instead of making a second pod.
	Name string
	// Role of the worker (aggregation, training, edge, cloud, train, eval, deploy).
	Role string
	// Hash of the spec the worker is built from.
	Hash string
	// Template from the user's spec.
	Template *corev1.PodTemplateSpec
	// Env the controller adds to every container; it replaces user entries of
	// the same name, since workers must see what the controller resolved,
	// except LC_SERVER (and what it is built from), which the user may set.
	Env []corev1.EnvVar
	// HostPaths are model and dataset paths on the node that the worker reads
	// or writes; they are mounted under DataPathPrefix.
	HostPaths []string
	// DataPathPrefix is where node paths appear in the container.
	DataPathPrefix string
}

// NewWorkerPod builds a worker's pod: the worker's template (NewWorkerTemplate),
// its name, and the owner's controller reference.
func NewWorkerPod(owner metav1.Object, ownerKind schema.GroupVersionKind, w Worker) *corev1.Pod {
	t := NewWorkerTemplate(owner, ownerKind, w)
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	pod.Name = w.Name
	pod.GenerateName = ""
	pod.Namespace = owner.GetNamespace()
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, ownerKind)}
	if pod.Spec.RestartPolicy == "" {
		// A worker is a run to completion; the controller, not the kubelet, replaces it.
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	return pod
}

// NewWorkerTemplate builds the pod template of a worker, for a pod of its own
// or for a Deployment: the user's template, the owner's labels, the role and
// hash labels, the worker environment in every container, and the node paths
// mounted under the data path prefix. w.Template is not changed.
func NewWorkerTemplate(owner metav1.Object, ownerKind schema.GroupVersionKind, w Worker) corev1.PodTemplateSpec {
	t := *w.Template.DeepCopy()
	t.Labels = MergeLabels(t.Labels, OwnerLabels(owner, LowerKind(ownerKind)), map[string]string{
		LabelWorkerRole:   w.Role,
		LabelTemplateHash: w.Hash,
	})
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		c.Env = MergeEnv(c.Env, withoutUserSet(w.Env, c.Env))
	}
	mountHostPaths(&t.Spec, w.HostPaths, w.DataPathPrefix)
	return t
}

// MergeEnv returns base with each of add set: an entry of the same name is
// replaced in place, others are appended in order.
func MergeEnv(base, add []corev1.EnvVar) []corev1.EnvVar {
	out := append([]corev1.EnvVar(nil), base...)
	for _, e := range add {
		replaced := false
		for i := range out {
			if out[i].Name == e.Name {
				out[i] = e
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

// MergeLabels returns the union of the maps; later maps win.
func MergeLabels(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// withoutUserSet is env without the entries the user may set and user sets.
func withoutUserSet(env, user []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, e := range env {
		if userSettable[e.Name] && slices.ContainsFunc(user, func(u corev1.EnvVar) bool { return u.Name == e.Name }) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// userSettable are the worker environment variables a user's template may
// set itself: where the worker finds its LocalController.
var userSettable = map[string]bool{EnvLCServer: true, EnvNodeIP: true}

// PodFinished says whether the pod has run to an end.
func PodFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// PodTerminating says whether the pod is on its way out.
func PodTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil
}

// IsLocalPath says whether a model or dataset URL is a path on the node (as
// opposed to s3:// or another scheme the worker reads itself).
func IsLocalPath(url string) bool {
	return strings.HasPrefix(url, "/")
}

// ContainerPath is where a node path appears inside a worker: under prefix
// (DATA_PATH_PREFIX), as Sedna's workers expect. Other URLs are unchanged.
func ContainerPath(url, prefix string) string {
	if !IsLocalPath(url) {
		return url
	}
	return path.Join(prefix, url)
}

// HostPathDir is the folder of the node path p that a worker gets mounted:
// p itself when it names a folder (no file extension), else its parent.
func HostPathDir(p string) string {
	dir := path.Clean(p)
	if path.Ext(dir) != "" {
		dir = path.Dir(dir)
	}
	return dir
}

// mountHostPaths mounts, read-write, the folder of each node path into every
// container under prefix: the path itself when it names a folder (no file
// extension), else its parent.
func mountHostPaths(spec *corev1.PodSpec, paths []string, prefix string) {
	seen := map[string]bool{}
	for _, p := range paths {
		if !IsLocalPath(p) {
			continue
		}
		dir := HostPathDir(p)
		if seen[dir] || dir == "/" {
			continue
		}
		seen[dir] = true
		name := "nereid-data-" + strings.ToLower(rand.SafeEncodeString(fmt.Sprint(fnvSum(dir))))[:8]
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		})
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{
				Name: name, MountPath: path.Join(prefix, dir),
			})
		}
	}
}

// PodsToClean are the pods a finished job's clean-pod policy deletes: "All"
// every pod, "None" none, and "Running" (the default, Sedna's and
// DI-engine's) those that have not run to an end. Pods already on their way
// out are left alone.
func PodsToClean(pods []*corev1.Pod, policy string) []*corev1.Pod {
	var doomed []*corev1.Pod
	for _, p := range pods {
		if PodTerminating(p) {
			continue
		}
		switch policy {
		case "None":
		case "All":
			doomed = append(doomed, p)
		default:
			if !PodFinished(p) {
				doomed = append(doomed, p)
			}
		}
	}
	return doomed
}

// RequestsDefaulted is a copy of spec with each container's unset requests
// taken from its limits, as the API server defaults a pod (templates are
// not defaulted).
func RequestsDefaulted(spec *corev1.PodSpec) *corev1.PodSpec {
	out := spec.DeepCopy()
	for _, cs := range [][]corev1.Container{out.InitContainers, out.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, set := r.Requests[name]; set {
					continue
				}
				if r.Requests == nil {
					r.Requests = corev1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
	return out
}
