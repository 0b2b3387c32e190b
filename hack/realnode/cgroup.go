package realnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the host mounts its cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// hierarchies are the mounted cgroup hierarchies: the folders of cgroup v1's
// controllers (and named hierarchies), or cgroup v2's one root.
func hierarchies() ([]string, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupRoot, &st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", cgroupRoot, err)
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return []string{cgroupRoot}, nil
	}
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(cgroupRoot, e.Name())
		// Symbolic links (cpu -> cpu,cpuacct) name a hierarchy twice.
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy under %s", cgroupRoot)
	}
	return out, nil
}

// makeCgroup makes the cgroup at rel (relative to each hierarchy's root) and
// its parents in every hierarchy. cpuset's cgroups take no process until
// they are given CPUs and memory nodes: each gets its parent's.
func makeCgroup(rel string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		parts := strings.Split(strings.Trim(rel, "/"), "/")
		dir := h
		for _, part := range parts {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("making cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
						if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
							return fmt.Errorf("giving cgroup %s its parent's %s: %w", dir, f, err)
						}
					}
				}
			}
		}
	}
	return nil
}

// joinCgroupScript is a shell line that moves the shell into the cgroup at
// rel in every hierarchy, so that what it then execs starts there.
func joinCgroupScript(rel string) (string, error) {
	hs, err := hierarchies()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "echo $$ > %s && ", shellQuote(filepath.Join(h, rel, "cgroup.procs")))
	}
	return b.String(), nil
}

// cgroupPids lists the processes in the cgroup at rel and under it, in any
// hierarchy.
func cgroupPids(rel string) ([]int, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, h := range hs {
		root := filepath.Join(h, rel)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	pids := make([]int, 0, len(seen))
	for p := range seen {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	return pids, nil
}

// killCgroup kills every process in the cgroup at rel and under it (the
// node's daemons, the shims, the containers: what a node is) until none is
// left, for at most timeout. Frozen or exiting processes take a moment.
func killCgroup(rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids, err := cgroupPids(rel)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroup %s after %s", pids, rel, timeout)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup removes the cgroup at rel and everything under it from every
// hierarchy, deepest first; it must hold no process.
func removeCgroup(rel string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, rel), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
