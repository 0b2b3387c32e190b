package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// git runs git in dir and returns its trimmed standard output; its error
// holds git's standard error.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// resolveCommit is the full commit a name (a commit, tag, branch, HEAD~1)
// names in the repository at root.
func resolveCommit(ctx context.Context, root, name string) (string, error) {
	sha, err := git(ctx, root, "rev-parse", "--verify", "--quiet", "--end-of-options", name+"^{commit}")
	if err != nil || sha == "" {
		return "", fmt.Errorf("-base %q: not a commit of %s", name, root)
	}
	return sha, nil
}

// headLabel names the working tree: its commit's short hash, and "+
// changes" when it differs from that commit (untracked files included).
func headLabel(ctx context.Context, root string) (string, error) {
	short, err := git(ctx, root, "rev-parse", "--short", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := git(ctx, root, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if status != "" {
		short += " + changes"
	}
	return short, nil
}

// cacheDir is where the built tools are and the base's worktree goes:
// $NEREID_CACHE_DIR, else the .cache of the repository's main working tree
// (git-ignored), so that every worktree of one clone shares one.
func cacheDir(ctx context.Context, root string) (string, error) {
	if dir := os.Getenv("NEREID_CACHE_DIR"); dir != "" {
		return filepath.Abs(dir)
	}
	common, err := git(ctx, root, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if filepath.Base(common) == ".git" {
		return filepath.Join(filepath.Dir(common), ".cache"), nil
	}
	return filepath.Join(root, ".cache"), nil // a bare repository's linked worktree
}

// baseWorktree returns a detached worktree of commit under cache, reusing
// the one a previous comparison made when it is still at commit and clean.
func baseWorktree(ctx context.Context, root, cache, commit string) (string, error) {
	dir := filepath.Join(cache, "bench-compare", commit)
	if _, err := os.Stat(dir); err == nil {
		at, err := git(ctx, dir, "rev-parse", "HEAD")
		if err != nil {
			return "", fmt.Errorf("the base's worktree %s: %w (remove it: git worktree remove --force %s)", dir, err, dir)
		}
		if at != commit {
			return "", fmt.Errorf("the base's worktree %s is at %s, not %s: remove it (git worktree remove --force %s)", dir, at, commit, dir)
		}
		status, err := git(ctx, dir, "status", "--porcelain")
		if err != nil {
			return "", err
		}
		if status != "" {
			return "", fmt.Errorf("the base's worktree %s has changes, so it is not the base any more:\n%s\nremove it: git worktree remove --force %s", dir, status, dir)
		}
		return dir, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	// A worktree deleted with rm -rf is still registered: forget it first.
	if _, err := git(ctx, root, "worktree", "prune"); err != nil {
		return "", err
	}
	if _, err := git(ctx, root, "worktree", "add", "--detach", dir, commit); err != nil {
		return "", err
	}
	return dir, nil
}
