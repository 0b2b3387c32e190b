package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// usage is where the API server's writes and reads (apiRequests) and the
// CPU time (sampleCPU) stood at one moment; two of them describe a measured
// window.
type usage struct {
	writes, reads, watches map[string]float64
	cpu                    cpuSample
}

// sampleUsage samples the API server's writes and the CPU time, the
// GlobalManager's too when gmPid is not 0.
func sampleUsage(ctx context.Context, kube kubernetes.Interface, gmPid int) (usage, error) {
	writes, reads, watches, err := apiRequests(ctx, kube)
	if err != nil {
		return usage{}, err
	}
	cpu, err := sampleCPU(gmPid)
	return usage{writes: writes, reads: reads, watches: watches, cpu: cpu}, err
}

// describeUsage says what the API server took and where the CPU went from
// a to b, over took.
func describeUsage(a, b usage, took time.Duration) string {
	return describeRequests("API writes", a.writes, b.writes, took) + "; " + describeRequests("API reads", a.reads, b.reads, took) +
		"; " + describeWatches(b.watches) + "; " + describeCPU(a.cpu, b.cpu, took)
}

// cpuSample is where the machine's CPU time had gone at one moment, in
// seconds: every core's busy time, the GlobalManager's (when one runs), this
// process's (the bench's clients and its simulated nodes) and each
// control-plane process's the bench knows (cluster). What the API server can
// take depends on what the rest of the machine takes: a ratio against a
// ceiling measured with the machine otherwise idle reads with these figures
// beside it.
type cpuSample struct {
	machine, gm, bench float64
	parts              []float64 // by cluster.processes; 0 for one not read
}

// sampleCPU samples the machine's busy time, the GlobalManager's (gmPid,
// none if 0), this process's and the control plane's.
func sampleCPU(gmPid int) (cpuSample, error) {
	var s cpuSample
	var err error
	if s.machine, err = machineBusySeconds(); err != nil {
		return s, err
	}
	if gmPid != 0 {
		if s.gm, err = cpuSeconds(gmPid); err != nil {
			return s, err
		}
	}
	for _, p := range cluster.processes {
		// A component that exited meanwhile is left out, not an error.
		secs, _ := cpuSeconds(p.pid)
		s.parts = append(s.parts, secs)
	}
	s.bench, err = cpuSeconds(os.Getpid())
	return s, err
}

// describeCPU says, in cores, where the CPU went from a to b over took: the
// machine's busy time, the GlobalManager's (when sampled), this process's,
// each control-plane process's, and the rest.
func describeCPU(a, b cpuSample, took time.Duration) string {
	cores := func(secs float64) float64 { return secs / took.Seconds() }
	machine, gm, bench := cores(b.machine-a.machine), cores(b.gm-a.gm), cores(b.bench-a.bench)
	parts := []string{}
	if b.gm != 0 {
		parts = append(parts, fmt.Sprintf("GlobalManager %.2f", gm))
	}
	parts = append(parts, fmt.Sprintf("bench process %.2f", bench))
	rest := machine - gm - bench
	for i, p := range cluster.processes {
		if i < len(a.parts) && i < len(b.parts) && a.parts[i] > 0 && b.parts[i] > 0 {
			c := cores(b.parts[i] - a.parts[i])
			parts = append(parts, fmt.Sprintf("%s %.2f", p.name, c))
			rest -= c
		}
	}
	what := "the rest"
	if len(cluster.processes) == 0 {
		what = "the rest (API server, etcd, kwok, …)"
	}
	parts = append(parts, fmt.Sprintf("%s %.2f", what, max(0, rest)))
	return fmt.Sprintf("machine busy %.2f of %d cores: %s", machine, runtime.NumCPU(), strings.Join(parts, ", "))
}

// cluster is what the bench knows of the control plane it measures: the
// processes whose CPU it reports apart, and whether the API server serves
// its profile. Set by useCluster.
var cluster struct {
	processes []controlPlaneProcess
	profiling bool
}

type controlPlaneProcess struct {
	name string
	pid  int
}

// controlPlaneComponents are the components hack/local-up.sh records in
// pids/<file>.pid, with the name the bench gives each and the start of its
// /proc comm (a pid file naming a reused pid is not read).
var controlPlaneComponents = []struct{ file, name, comm string }{
	{"kube-apiserver", "API server", "kube-apiserver"},
	{"etcd", "etcd", "etcd"},
	{"kwok", "kwok", "kwok"},
	{"kube-controller-manager", "controller-manager", "kube-controller"},
	{"kube-scheduler", "scheduler", "kube-scheduler"},
}

// useCluster sets cluster for the control plane of kubeconfig: its processes
// from the pid files beside it (none for a cluster that hack/local-up.sh did
// not start), and profiling as the bench started it.
func useCluster(kubeconfig string, profiling bool) {
	cluster.processes, cluster.profiling = nil, profiling
	dir := filepath.Join(filepath.Dir(kubeconfig), "pids")
	for _, c := range controlPlaneComponents {
		data, err := os.ReadFile(filepath.Join(dir, c.file+".pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !strings.HasPrefix(string(comm), c.comm) {
			continue
		}
		cluster.processes = append(cluster.processes, controlPlaneProcess{c.name, pid})
	}
}

// profileAPIServer records the API server's CPU profile for d, from now,
// into file, when the bench started it with profiling on (saveProfile).
func profileAPIServer(ctx context.Context, kube kubernetes.Interface, d time.Duration, file string) func() string {
	if !cluster.profiling {
		return func() string { return "no API server CPU profile: the bench did not start this control plane" }
	}
	return saveProfile(ctx, "API server", d, file, func(ctx context.Context) ([]byte, error) {
		return kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(ctx)
	})
}

// profileGlobalManager records the CPU profile of the GlobalManager serving
// its metrics at addr (--profiling) for d, from now, into file
// (saveProfile).
func profileGlobalManager(ctx context.Context, addr string, d time.Duration, file string) func() string {
	return saveProfile(ctx, "GlobalManager", d, file, func(ctx context.Context) ([]byte, error) {
		body, err := httpGetWithin(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())), d+10*time.Second)
		return []byte(body), err
	})
}

// saveProfile fetches what's CPU profile of d from now, in the background,
// into file, and returns a function that waits for it and says where it
// is, or why there is none, for a row's note: a missing profile is a note,
// not the end of the section.
func saveProfile(ctx context.Context, what string, d time.Duration, file string, fetch func(context.Context) ([]byte, error)) func() string {
	done := make(chan string, 1)
	go func() {
		body, err := fetch(ctx)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(file), 0o755)
		}
		if err == nil {
			err = os.WriteFile(file, body, 0o644)
		}
		if err != nil {
			done <- fmt.Sprintf("no %s CPU profile: %v", what, err)
			return
		}
		done <- fmt.Sprintf("the %s's CPU profile of the first %s: %s (go tool pprof -top)", what, d, file)
	}()
	return func() string { return <-done }
}

// machineBusySeconds is the time every core of the machine has spent busy
// (/proc/stat: all but idle and iowait).
func machineBusySeconds() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading the machine's CPU time: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected first line of /proc/stat: %q", line)
	}
	busy := 0.0
	// user nice system idle iowait irq softirq steal (guest time is in user)
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		busy += n
	}
	return busy / ticksPerSecond, nil
}

// cpuSeconds is the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// Fields after the command name (which may hold spaces) start at state, field 3.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	return (utime + stime) / ticksPerSecond, nil
}

// ticksPerSecond is the unit of /proc's CPU times (USER_HZ on Linux).
const ticksPerSecond = 100

func residentMiB(pid int) (float64, error) {
	return procStatusMiB(pid, "VmRSS")
}

// residentParts says how much of a process's resident memory is its own
// (anonymous: heap, stacks, the runtime's) and how much is mapped from files
// (its binary's pages).
func residentParts(pid int) string {
	anon, err := procStatusMiB(pid, "RssAnon")
	if err != nil {
		return err.Error()
	}
	file, err := procStatusMiB(pid, "RssFile")
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("resident %.1f MiB anonymous + %.1f MiB from files", anon, file)
}

// procStatusMiB reads one kB field of /proc/<pid>/status, in MiB.
func procStatusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// apiRequests reads the API server's count of write requests (POST, PUT,
// PATCH) by resource, of reads (GET, LIST) by verb and resource, and the
// watches open now by resource, from its own metrics.
func apiRequests(ctx context.Context, kube kubernetes.Interface) (writes, reads, watches map[string]float64, err error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	writes, reads, watches = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, labels, n, ok := metricLine(line)
		if !ok {
			continue
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		switch verb := labels["verb"]; {
		case name == "apiserver_request_total" && (verb == "POST" || verb == "PUT" || verb == "PATCH"):
			writes[res] += n
		case name == "apiserver_request_total" && (verb == "GET" || verb == "LIST"):
			reads[verb+" "+res] += n
		case name == "apiserver_longrunning_requests" && verb == "WATCH":
			watches[res] += n
		}
	}
	return writes, reads, watches, nil
}

// metricLine splits one sample of the Prometheus text format into its
// name, labels and value; ok is false for a comment or a line it cannot
// read.
func metricLine(line string) (name string, labels map[string]string, value float64, ok bool) {
	name, rest, found := strings.Cut(line, "{")
	if !found || strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	list, v, found := strings.Cut(rest, "} ")
	if !found {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	for _, kv := range strings.Split(list, ",") {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = strings.Trim(v, `"`)
	}
	return name, labels, value, true
}

// describeWatches says how many watches the API server held, with the
// resources most watched: every change of such an object goes to each.
func describeWatches(watches map[string]float64) string {
	total, top := largest(watches)
	return fmt.Sprintf("watches open %.0f (%s)", total, top)
}

// describeRequests says how many requests of one sort (what, "API
// writes") the API server took between two readings, and at what rate,
// with the largest resources.
func describeRequests(what string, before, after map[string]float64, took time.Duration) string {
	grew := map[string]float64{}
	for res, n := range after {
		if d := n - before[res]; d > 0 {
			grew[res] = d
		}
	}
	total, top := largest(grew)
	return fmt.Sprintf("%s %.0f (%.0f/s: %s)", what, total, total/took.Seconds(), top)
}

// largest is the sum of counts and the 8 largest of them, "name count"
// each, largest first.
func largest(counts map[string]float64) (total float64, top string) {
	names := make([]string, 0, len(counts))
	for name, n := range counts {
		names = append(names, name)
		total += n
	}
	sort.Slice(names, func(i, j int) bool {
		return counts[names[i]] > counts[names[j]] || counts[names[i]] == counts[names[j]] && names[i] < names[j]
	})
	parts := make([]string, 0, 8)
	for _, name := range names[:min(len(names), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.0f", name, counts[name]))
	}
	return total, strings.Join(parts, ", ")
}
