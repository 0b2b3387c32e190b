package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nereid-ml/nereid/hack/imagearchive"
)

// pauseSource is the sandbox's one process: it waits for a signal, reaping
// children (it is pid 1 of a pod that shares its process namespace), and
// exits on SIGTERM or SIGINT.
const pauseSource = `#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }

int main(void) {
	signal(SIGTERM, stop);
	signal(SIGINT, stop);
	signal(SIGCHLD, reap);
	for (;;) pause();
}
`

// pauseArchive builds the pause image's archive into dir (once: it is kept
// while pause.c is unchanged) and returns its path. The binary is static:
// the image holds nothing else.
func pauseArchive(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "pause.c")
	archive := filepath.Join(dir, "pause.tar")
	if old, err := os.ReadFile(src); err == nil && string(old) == pauseSource {
		if _, err := os.Stat(archive); err == nil {
			return archive, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(src+".tmp", []byte(pauseSource), 0o644); err != nil {
		return "", err
	}
	if err := run(ctx, "gcc", "-static", "-O2", "-o", bin, "-x", "c", src+".tmp"); err != nil {
		return "", fmt.Errorf("building the pause image's binary (gcc and glibc's static library, Debian's libc6-dev): %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	img := imagearchive.Image{Ref: PauseImage, Name: "pause", Binary: data, User: "65535:65535", Arch: runtime.GOARCH}
	if err := imagearchive.Write(&buf, img); err != nil {
		return "", err
	}
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	_ = os.Remove(bin)
	return archive, os.Rename(src+".tmp", src)
}

// importImage imports an image archive into node i's containerd, in the
// namespace the kubelet's images live in.
func importImage(ctx context.Context, l Layout, i int, archive string) error {
	// nsenter starts the command at the namespace's root.
	archive, err := filepath.Abs(archive)
	if err != nil {
		return err
	}
	return run(ctx, "nsenter", "--mount="+l.MountNS(i), "--",
		"ctr", "--address", containerdSocket, "--namespace", "k8s.io", "images", "import", archive)
}
