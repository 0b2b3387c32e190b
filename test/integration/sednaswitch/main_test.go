// Package sednaswitch tests switching a cluster from KubeEdge Sedna to Nereid in
// place: Sedna's CRDs and objects first, then Nereid's CRDs and GlobalManager.
// It starts a control plane of its own without Nereid's CRDs, and needs Sedna's
// CRDs and samples in ../shared/sedna-compat (see framework.SednaCompatDir);
// without them every test skips, and no control plane is started.
package sednaswitch

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/test/framework"
)

func TestMain(m *testing.M) {
	if _, err := framework.SednaCompatDir(); err != nil {
		fmt.Fprintf(os.Stderr, "sednaswitch: %v; its tests skip\n", err)
		os.Exit(m.Run())
	}
	// The switch runs the GlobalManager as the chart does with
	// sednaSwitch.adoptWorkers: adopting (--adopt-sedna-workers) with the
	// permissions that needs. Clusters that ran Sedna are often older than
	// Kubernetes' gang API: this one serves none, so the GlobalManager's
	// --gang-scheduler=auto finds no gang scheduler and runs jobs as before.
	os.Exit(framework.Run(m, framework.WithoutNereidCRDs(), framework.WithoutGangAPI(), framework.WithChartValues("--set", "sednaSwitch.adoptWorkers=true")))
}

var (
	sednaCRDsOnce sync.Once
	sednaCRDsErr  error
)

// installSednaCRDs installs all of Sedna's CRDs once per test binary, as
// Sedna's README does (server-side: four of them exceed client-side apply's
// annotation), and waits until they serve.
func installSednaCRDs(t *testing.T, compat string) {
	t.Helper()
	sednaCRDsOnce.Do(func() {
		dir := filepath.Join(compat, "crds")
		if out, err := framework.Kubectl(t, "apply", "--server-side", "-f", dir); err != nil {
			sednaCRDsErr = fmt.Errorf("applying Sedna's CRDs: %w\n%s", err, out)
			return
		}
		if out, err := framework.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "-f", dir); err != nil {
			sednaCRDsErr = fmt.Errorf("waiting for Sedna's CRDs: %w\n%s", err, out)
		}
	})
	if sednaCRDsErr != nil {
		t.Fatal(sednaCRDsErr)
	}
}

// applyNereidCRDs applies Nereid's CRDs over Sedna's as
// docs/switching-from-sedna.md says.
func applyNereidCRDs(t *testing.T) {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(), "build", "crds")
	if out, err := framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", dir); err != nil {
		t.Fatalf("applying Nereid's CRDs: %v\n%s", err, out)
	}
	if out, err := framework.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "-f", dir); err != nil {
		t.Fatalf("waiting for Nereid's CRDs: %v\n%s", err, out)
	}
}

const waitLong = 90 * time.Second
