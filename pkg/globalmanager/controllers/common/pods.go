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
	"k8s.io/apimachinery/pkg/util/sets"
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
	// Env the controller adds to every container, by Sedna's rule (see
	// ContainerEnv): a variable Sedna's GlobalManager sets for this worker
	// type replaces the template's entry of that name; every other one is a
	// default, which the template's own entry overrides.
	Env []corev1.EnvVar
	// SednaEnv names the variables of Env that Sedna's GlobalManager sets for
	// this worker type, beyond those it sets for every worker (SednaEveryWorker).
	SednaEnv []string
	// HostPaths are model and dataset paths on the node that the worker reads
	// or writes; they are mounted under DataPathPrefix.
	HostPaths []string
	// DataPathPrefix is where node paths appear in the container.
	DataPathPrefix string
	// Mounts are node folders mounted at paths of their own (not under
	// DataPathPrefix), made on the node if missing.
	Mounts []NodeMount
}

// NodeMount is a node folder that a worker gets at a path of its own.
type NodeMount struct {
	// Name of the pod's volume.
	Name string
	// NodePath is the folder on the node; the kubelet makes it if missing.
	NodePath string
	// MountPath is where it appears in every container.
	MountPath string
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
		c.Env = ContainerEnv(c.Env, w)
	}
	mountHostPaths(&t.Spec, w.HostPaths, w.DataPathPrefix)
	mountNodeFolders(&t.Spec, w.Mounts)
	return t
}

// mountNodeFolders mounts each of mounts, read-write, into every container.
func mountNodeFolders(spec *corev1.PodSpec, mounts []NodeMount) {
	create := corev1.HostPathDirectoryOrCreate
	for _, m := range mounts {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         m.Name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.NodePath, Type: &create}},
		})
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath})
		}
	}
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

// ContainerEnv is a container's environment: the template's (user), with
// w.Env set in it as Sedna's GlobalManager sets a worker's environment.
// Sedna appends the variables it sets for the worker type after the
// template's, and of two entries with one name a container gets the last
// (the kubelet builds the environment in order, a later entry overwriting an
// earlier one): so a variable Sedna sets is the controller's, and replaces
// the template's entry in place. Every other variable of w.Env is a default
// (w.Defaults): Sedna's workers never got it from the controller, so the
// template's entry, when there is one, stays as it is — the user's
// environment is the user's (a joint inference cloud worker's MODEL_NAME
// names the model of the API it calls, not Nereid's Model object).
func ContainerEnv(user []corev1.EnvVar, w Worker) []corev1.EnvVar {
	defaults := sets.New(w.Defaults()...)
	set := make([]corev1.EnvVar, 0, len(w.Env))
	for _, e := range w.Env {
		if defaults.Has(e.Name) && slices.ContainsFunc(user, func(u corev1.EnvVar) bool { return u.Name == e.Name }) {
			continue
		}
		set = append(set, e)
	}
	return MergeEnv(user, set)
}

// Defaults are the variables of w.Env that a template overrides: those
// Sedna's GlobalManager does not set for the worker type (neither in
// w.SednaEnv nor in SednaEveryWorker, nor DATA_PATH_PREFIX when a node path
// is mounted), and LC_SERVER (templateWins), in Env's order.
func (w Worker) Defaults() []string {
	sedna := sets.New(w.SednaEnv...).Insert(SednaEveryWorker...)
	if len(mountedDirs(w.HostPaths)) > 0 {
		// Sedna sets DATA_PATH_PREFIX when it mounts a node path.
		sedna.Insert(EnvDataPathPrefix)
	}
	var names []string
	for _, e := range w.Env {
		if !sedna.Has(e.Name) || templateWins[e.Name] {
			names = append(names, e.Name)
		}
	}
	return names
}

// templateWins are the variables a template may set for itself even where
// Sedna's GlobalManager sets them: where the worker finds its LocalController
// (Nereid's LocalController listens on every node, and a template that names
// another address, a proxy say, means it).
var templateWins = map[string]bool{EnvLCServer: true}

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

// mountedDirs are the node folders that paths make a worker mount, once
// each: the folder of each node path (HostPathDir), never the root.
func mountedDirs(paths []string) []string {
	var dirs []string
	for _, p := range paths {
		if !IsLocalPath(p) {
			continue
		}
		dir := HostPathDir(p)
		if dir == "/" || slices.Contains(dirs, dir) {
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// mountHostPaths mounts, read-write, the folder of each node path into every
// container under prefix (mountedDirs).
func mountHostPaths(spec *corev1.PodSpec, paths []string, prefix string) {
	for _, dir := range mountedDirs(paths) {
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
