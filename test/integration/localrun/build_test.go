package localrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nereid-ml/nereid/test/framework"
)

// builds are the commands built so far by this test binary, by package.
var builds sync.Map // string → *build

type build struct {
	once sync.Once
	bin  string
	err  error
	out  string
}

// built builds a command of the repository (./hack/demo,
// ./cmd/kubectl-nereid) once per test binary, as a user builds it, and
// returns the binary's path; it fails the test with the compiler's output
// when the build fails.
func built(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "nereid-localrun-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.bin, pkg)
		cmd.Dir = framework.RepoRoot()
		out, err := cmd.CombinedOutput()
		b.err, b.out = err, string(out)
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", strings.TrimPrefix(pkg, "./"), b.err, b.out)
	}
	return b.bin
}
