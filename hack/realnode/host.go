package realnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// hostNeeds are what a real node needs of the host, each with the Debian
// package that has it.
var hostNeeds = []struct{ path, pkg string }{
	{"ip", "iproute2"},
	{"nsenter", "util-linux"},
	{"unshare", "util-linux"},
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables-restore", "iptables"},
	{"/usr/lib/cni/bridge", "containernetworking-plugins"},
	{"/usr/lib/cni/host-local", "containernetworking-plugins"},
	{"/usr/lib/cni/loopback", "containernetworking-plugins"},
	{"gcc", "gcc"},
	// The worker image's Debian root filesystem (hack/workerimage).
	{"mmdebstrap", "mmdebstrap"},
	{"/usr/lib/x86_64-linux-gnu/libc.a", "libc6-dev"},
}

// missingPackages lists the packages of what the host lacks.
func missingPackages() []string {
	set := map[string]bool{}
	for _, n := range hostNeeds {
		if filepath.IsAbs(n.path) {
			if _, err := os.Stat(n.path); err != nil {
				set[n.pkg] = true
			}
		} else if _, err := exec.LookPath(n.path); err != nil {
			set[n.pkg] = true
		}
	}
	pkgs := make([]string, 0, len(set))
	for p := range set {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs
}

// EnsureHost checks that this process may make nodes (root) and that the
// host has what they need, installing what it lacks with apt.
func EnsureHost(ctx context.Context, install bool) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (network and mount namespaces, cgroups, containerd): run as root, or without NEREID_REAL_NODES")
	}
	pkgs := missingPackages()
	if len(pkgs) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("real nodes need these Debian packages: apt-get install %s", strings.Join(pkgs, " "))
	}
	fmt.Fprintf(os.Stderr, "installing what real nodes need: apt-get install %s\n", strings.Join(pkgs, " "))
	if err := run(ctx, "apt-get", "update", "-qq"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %w: %s", strings.Join(pkgs, " "), err, out)
	}
	if left := missingPackages(); len(left) > 0 {
		return fmt.Errorf("still missing after apt-get install: %s", strings.Join(left, " "))
	}
	return nil
}

// kubeletSysctls are the kernel settings the kubelet sets at its start:
// Down puts back what they were before.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

const savedSysctls = "sysctls.saved"

// saveSysctls records the kubelet's settings as they are, unless a record
// exists (a run that was not taken down: what it holds is the host's own).
func saveSysctls(l Layout) error {
	file := filepath.Join(l.Dir(), savedSysctls)
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	var b strings.Builder
	for _, s := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", s, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// restoreSysctls puts back the settings saveSysctls recorded.
func restoreSysctls(l Layout) error {
	file := filepath.Join(l.Dir(), savedSysctls)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains(kubeletSysctls, name) {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", name, value, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(file)
	}
	return errors.Join(errs...)
}
