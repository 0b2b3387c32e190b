// Package sednalib runs Sedna's own Python library (../shared/sedna-compat/lib,
// unchanged) as the worker of a pod of the local run: the pod's container's
// environment read from its spec (literal values, $(VAR) references, the
// downward API, ConfigMaps and Secrets), its hostPath volumes mounted at their
// mountPaths from its node's folder, and its address.
//
// kwok's pods run no container, so the harness is the container: a process of
// Debian's python3 in a mount namespace of its own whose root is this machine's
// (an overlay, so that writes outside the volumes stay in the process) with the
// pod's hostPath volumes bound in; py/sitecustomize.py gives it the pod's
// network (its address, and what DNS, kube-proxy and the node's address would
// route). The worker code is py/nereid_workers.py (lifelong learning's and the
// knowledge base server's in py/nereid_ll.py): the worker scripts of Sedna's
// examples with trivial estimators in place of TensorFlow and PyTorch models,
// and stand-ins for the little of tensorflow and sklearn that Sedna's library
// imports for them.
package sednalib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Python is the interpreter the workers run: Debian's, whose packages
// (python3-numpy, python3-fastapi, …: .ci/run installs them) are what Sedna's
// library imports.
const Python = "/usr/bin/python3"

// Node is what the harness needs of a node: where its "/" is on this machine
// and where its LocalController's worker API listens.
type Node struct {
	Root string
	// LocalController is its worker API's address (host:port); the pods'
	// LC_SERVER, http://<node address>:<LCPort>, is routed there.
	LocalController string
}

// Harness starts workers for the pods of one cluster.
type Harness struct {
	Kube  kubernetes.Interface
	Nodes map[string]Node
	// LCPort is the GlobalManager's --lc-port (9100 when 0).
	LCPort int
	// LogDir holds each worker's output, <pod>.log.
	LogDir string
}

// Dir is the folder of the harness's Python code.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "py")
}

// SednaLib is Sedna's library in compatDir (framework.SednaCompatDir), or an
// error saying why there is none.
func SednaLib(compatDir string) (string, error) {
	dir := filepath.Join(compatDir, "lib")
	if _, err := os.Stat(filepath.Join(dir, "sedna", "__init__.py")); err != nil {
		return "", fmt.Errorf("no Sedna library at %s: %w", dir, err)
	}
	return filepath.Abs(dir)
}

// Usable says why this machine cannot run the harness, or nil: Debian's
// python3 with the packages Sedna's library imports, and root (for the mount
// namespace).
func Usable(ctx context.Context, sednaLib string) error {
	if os.Geteuid() != 0 {
		return errors.New("the harness needs root, for the workers' mount namespaces")
	}
	cmd := exec.CommandContext(ctx, Python, "-c",
		"import numpy, requests, tenacity, websockets, fastapi, multipart, uvicorn, colorlog, joblib, pandas, yaml, six, watchdog, sqlalchemy")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s cannot import what Sedna's library needs (hack/sedna-python.sh installs it: apt-get install "+
			"python3-numpy python3-requests python3-tenacity python3-websockets python3-fastapi python3-multipart python3-uvicorn "+
			"python3-colorlog python3-joblib python3-pandas python3-yaml python3-six python3-watchdog python3-sqlalchemy): %v: %s",
			Python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Worker is a pod's worker process.
type Worker struct {
	Pod     *corev1.Pod
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	scratch string
}

// Run is what a worker runs.
type Run struct {
	// Role is a role of py/nereid_workers.py.
	Role string
	// ImageEnv is the environment the worker's image would set (Sedna's
	// images set BACKEND_TYPE, say); the pod's own comes after it and wins.
	ImageEnv map[string]string
	// Override is set after the pod's environment, to shorten a test (a
	// joint inference worker's LC_PERIOD, say); each test says why.
	Override map[string]string
}

// Start runs r as the first container of pod, which must be bound to a node
// of h.Nodes and have its address.
func (h *Harness) Start(ctx context.Context, sednaLib string, pod *corev1.Pod, r Run) (*Worker, error) {
	node, ok := h.Nodes[pod.Spec.NodeName]
	if !ok {
		return nil, fmt.Errorf("pod %s/%s is on node %q, which the harness has no folder for", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if pod.Status.PodIP == "" || len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %s/%s has no address or no container yet", pod.Namespace, pod.Name)
	}
	c := &pod.Spec.Containers[0]
	env, err := h.containerEnv(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	routes, err := h.routes(ctx, pod, node)
	if err != nil {
		return nil, err
	}
	podnet, err := json.Marshal(map[string]any{"podIP": pod.Status.PodIP, "routes": routes})
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "sednalib-"+pod.Name+"-")
	if err != nil {
		return nil, err
	}
	script, err := mountScript(scratch, node.Root, pod, c)
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, err
	}
	full := append(baseEnv(sednaLib), "NEREID_PODNET="+string(podnet))
	for k, v := range r.ImageEnv {
		full = append(full, k+"="+v)
	}
	full = append(full, env...)
	for k, v := range r.Override {
		full = append(full, k+"="+v)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", r.Role)
	cmd.Env = full
	return h.start(cmd, pod, pod.Name, scratch)
}

// StartOnHost runs role on this machine as a server of the cluster's (Sedna's
// knowledge base server, say), not as a pod: no mount namespace, the
// machine's own network; env is its environment.
func (h *Harness) StartOnHost(sednaLib, role string, env map[string]string) (*Worker, error) {
	cmd := exec.Command(Python, "-m", "nereid_workers", role)
	cmd.Env = baseEnv(sednaLib)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return h.start(cmd, nil, role, "")
}

// baseEnv is what every worker's environment starts with: the harness's
// Python code and Sedna's library to import, no bytecode written beside them.
func baseEnv(sednaLib string) []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=" + Dir() + ":" + sednaLib}
}

// start starts cmd, its output in LogDir/<name>.log, and removes scratch
// when it has exited.
func (h *Harness) start(cmd *exec.Cmd, pod *corev1.Pod, name, scratch string) (*Worker, error) {
	if err := os.MkdirAll(h.LogDir, 0o755); err != nil {
		return nil, err
	}
	w := &Worker{Pod: pod, LogPath: filepath.Join(h.LogDir, name+".log"), done: make(chan struct{}), scratch: scratch, cmd: cmd}
	log, err := os.Create(w.LogPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s's worker: %w", name, err)
	}
	go func() {
		w.err = cmd.Wait()
		log.Close()
		if w.scratch != "" {
			_ = os.RemoveAll(w.scratch)
		}
		close(w.done)
	}()
	return w, nil
}

// Done is closed when the worker has exited.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err is how the worker exited, once Done is closed.
func (w *Worker) Err() error { return w.err }

// Stop kills the worker and waits for it.
func (w *Worker) Stop() {
	if w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-w.done
}

// Log is what the worker has printed.
func (w *Worker) Log() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}

// mountScript is the shell script that gives the worker its filesystem: this
// machine's, seen through an overlay, with the pod's hostPath volumes bound at
// their mountPaths, then runs the worker ($1 is its role) chrooted there.
func mountScript(scratch, nodeRoot string, pod *corev1.Pod, c *corev1.Container) (string, error) {
	root, upper, work := filepath.Join(scratch, "root"), filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{root, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	volumes := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			volumes[v.Name] = v.HostPath
		}
	}
	q := shellQuote
	lines := []string{"set -e",
		fmt.Sprintf("mount -t overlay overlay -o lowerdir=/,upperdir=%s,workdir=%s %s", q(upper), q(work), q(root)),
		"mount --rbind /dev " + q(root+"/dev"),
		"mount -t proc proc " + q(root+"/proc"),
	}
	for _, m := range c.VolumeMounts {
		hp, ok := volumes[m.Name]
		if !ok {
			continue // only hostPath volumes are the node's
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return "", fmt.Errorf("pod %s mounts %s with a subPath, which the harness does not do", pod.Name, m.Name)
		}
		src := filepath.Join(nodeRoot, filepath.FromSlash(path.Clean("/"+hp.Path)))
		if err := ensureHostPath(src, hp.Type); err != nil {
			return "", fmt.Errorf("pod %s's volume %s (%s): %w", pod.Name, m.Name, hp.Path, err)
		}
		dst := root + path.Clean("/"+m.MountPath)
		if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
			lines = append(lines, fmt.Sprintf("mkdir -p %s && touch %s", q(filepath.Dir(dst)), q(dst)))
		} else {
			lines = append(lines, "mkdir -p "+q(dst))
		}
		ro := ""
		if m.ReadOnly {
			ro = " && mount -o remount,bind,ro " + q(dst)
		}
		lines = append(lines, fmt.Sprintf("mount --bind %s %s%s", q(src), q(dst), ro))
	}
	lines = append(lines, fmt.Sprintf(`exec chroot %s %s -m nereid_workers "$1"`, q(root), Python))
	return strings.Join(lines, "\n"), nil
}

// ensureHostPath makes what a kubelet makes of a hostPath volume's type.
func ensureHostPath(src string, t *corev1.HostPathType) error {
	kind := corev1.HostPathUnset
	if t != nil {
		kind = *t
	}
	switch kind {
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(src, 0o755)
	case corev1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(src, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case corev1.HostPathUnset:
		// The kubelet checks nothing; a bind needs the source: the
		// folder, as a container runtime makes it.
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			return os.MkdirAll(src, 0o755)
		}
		return nil
	}
	_, err := os.Stat(src)
	return err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// routes are the pod network's routes for the worker of pod on node (see
// py/sitecustomize.py): each Service of its namespace, by its names and its
// cluster IP, to a running pod it selects, and the node's address at the
// LocalController's port to that node's LocalController.
func (h *Harness) routes(ctx context.Context, pod *corev1.Pod, node Node) (map[string]string, error) {
	routes := map[string]string{}
	lcPort := h.LCPort
	if lcPort == 0 {
		lcPort = 9100
	}
	if pod.Status.HostIP != "" && node.LocalController != "" {
		routes[net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(lcPort))] = node.LocalController
	}
	services, err := h.Kube.CoreV1().Services(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the Services of %s: %w", pod.Namespace, err)
	}
	pods, err := h.Kube.CoreV1().Pods(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", pod.Namespace, err)
	}
	for _, svc := range services.Items {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var backend *corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && sel.Matches(labels.Set(p.Labels)) {
				backend = p
				break
			}
		}
		if backend == nil {
			continue
		}
		names := []string{svc.Name, svc.Name + "." + svc.Namespace, svc.Name + "." + svc.Namespace + ".svc",
			svc.Name + "." + svc.Namespace + ".svc.cluster.local"}
		if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
			names = append(names, ip)
		}
		for _, port := range svc.Spec.Ports {
			target := targetPort(backend, port)
			for _, n := range names {
				routes[net.JoinHostPort(n, strconv.Itoa(int(port.Port)))] = net.JoinHostPort(backend.Status.PodIP, strconv.Itoa(target))
			}
		}
	}
	return routes, nil
}

// targetPort is the port of backend a Service's port goes to.
func targetPort(backend *corev1.Pod, port corev1.ServicePort) int {
	tp := port.TargetPort
	switch {
	case tp.IntValue() != 0:
		return tp.IntValue()
	case tp.StrVal != "":
		for _, c := range backend.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == tp.StrVal {
					return int(cp.ContainerPort)
				}
			}
		}
	}
	return int(port.Port)
}

// URLHost is the host:port of a URL such as a LocalController's worker URL.
func URLHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}
