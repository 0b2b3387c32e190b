package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// nodePaths are the host paths every node has a folder of its own for, under
// NodeDir/root, in its mount namespace: the runtime's and the kubelet's state
// and logs at the paths they have on a real node, and what the chart's and
// Sedna's hostPath volumes name (the LocalController's store at
// localController.dataDir, its allowedPaths, the model hot update folders
// under /var/lib/sedna, where Sedna's examples keep datasets and models). Two nodes of one machine thus neither share a
// LocalController's store nor a dataset, as two machines would not.
var nodePaths = []string{
	"/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni", "/etc/cni/net.d",
	"/var/log/pods", "/var/log/containers",
	"/var/lib/nereid", "/var/lib/sedna", "/data", "/model", "/models", "/output",
}

// madeHostPaths is the file, under Layout.Dir, listing the mount points Up
// made on the host because it lacked them; Down removes them when empty.
const madeHostPaths = "made-host-paths"

// makeMountNS makes node i's mount namespace, held by the file
// Layout.MountNS(i): a slave of the host's (the host's later mounts show in
// it, none of its own show on the host), its mounts shared within it, with a /run of its own (the
// runtime's sockets and state, the pods' network namespaces) and the node's
// folders over nodePaths.
func makeMountNS(ctx context.Context, l Layout, i int) error {
	nsDir := filepath.Dir(l.MountNS(i))
	if err := privateMount(ctx, nsDir); err != nil {
		return err
	}
	if err := os.WriteFile(l.MountNS(i), nil, 0o600); err != nil {
		return err
	}
	if err := ensureHostPaths(l); err != nil {
		return err
	}
	script := []string{"mount -t tmpfs -o mode=0755 nereid-run /run"}
	for _, p := range nodePaths {
		src := filepath.Join(l.NodeDir(i), "root", p)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		script = append(script, fmt.Sprintf("mount --bind %s %s", shellQuote(src), shellQuote(p)))
	}
	// Shared within the node, as a node's mounts are (systemd makes / shared):
	// a volume with mountPropagation needs its source to be shared or a
	// slave, and what the node's namespace shares stays in its own peer
	// group, never reaching the host's.
	script = append(script, "mount --make-rshared /")
	return run(ctx, "unshare", "--mount="+l.MountNS(i), "--propagation=slave", "sh", "-ec", strings.Join(script, "\n"))
}

// ensureHostPaths makes the mount points of nodePaths the host lacks, and
// adds them to the list Down removes.
func ensureHostPaths(l Layout) error {
	for _, p := range nodePaths {
		if _, err := os.Stat(p); err == nil {
			continue
		}
		// Record first: a folder made and not listed would stay.
		if err := appendLine(filepath.Join(l.Dir(), madeHostPaths), p); err != nil {
			return err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("making mount point %s: %w", p, err)
		}
	}
	return nil
}

func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// removeMadeHostPaths removes the mount points Up made on the host, those
// that are empty (another run may still use one: it is then not empty on
// the host's side only if something wrote there, which no node does).
func removeMadeHostPaths(l Layout) {
	file := filepath.Join(l.Dir(), madeHostPaths)
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	lines := strings.Fields(string(data))
	for i := len(lines) - 1; i >= 0; i-- {
		_ = os.Remove(lines[i])
	}
	_ = os.Remove(file)
}

// privateMount makes dir a mount point of its own, private, so that a
// namespace file bound into it does not propagate into the very namespace
// it holds (which the kernel refuses), as ip netns does with /run/netns.
func privateMount(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if !mounted {
		if err := run(ctx, "mount", "--bind", dir, dir); err != nil {
			return err
		}
	}
	return run(ctx, "mount", "--make-private", dir)
}

// isMountPoint says whether dir is a mount point in this mount namespace.
func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == dir {
			return true, nil
		}
	}
	return false, s.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes of blanks.
func unescapeMountPath(p string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(p)
}

// removeMountNamespaces unmounts the files that hold the run's mount
// namespaces (each namespace ends with its last process), then their folder.
func removeMountNamespaces(ctx context.Context, l Layout) error {
	nsDir := filepath.Join(l.RunDir(), "ns")
	entries, err := os.ReadDir(nsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(nsDir, e.Name())
		if m, _ := isMountPoint(p); m {
			if err := run(ctx, "umount", p); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		_ = os.Remove(p)
	}
	if m, _ := isMountPoint(nsDir); m {
		if err := run(ctx, "umount", nsDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, os.RemoveAll(l.RunDir()))...)
}
