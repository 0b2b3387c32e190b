package main

import (
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists the preflight's flags (it logs nothing, so it has no klog
// flags); --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	commandtest.CheckHelp(t, []string{"kubeconfig", "namespace", "sedna-globalmanager", "sedna-localcontroller", "sedna-namespace", "timeout"}, false)
	commandtest.CheckVersion(t, "nereid-preflight")
}

// --help names every kind of the GlobalManager's table, those it counts
// (sedna.io's) in the list of counted kinds: the text follows the table.
func TestHelpNamesEveryKindOfTheTable(t *testing.T) {
	res := commandtest.Run(t, "--help")
	if res.Code != 0 {
		t.Fatalf("--help exited %d: %s", res.Code, res.Stderr)
	}
	help := res.Stdout + res.Stderr
	_, counted, ok := strings.Cut(help, "Nereid's GlobalManager takes over:")
	if !ok {
		t.Fatalf("--help has no list of the kinds it counts:\n%s", help)
	}
	counted, _, _ = strings.Cut(counted, ".\n")
	table := kinds.All()
	if len(table) < 7 {
		t.Fatalf("the table has %d kinds, want the 6 of sedna.io and DIJob", len(table))
	}
	for _, k := range table {
		switch {
		case k.GVK.GroupVersion() == sednav1.SchemeGroupVersion && !strings.Contains(counted, k.GVK.Kind):
			t.Errorf("--help does not list %s among the kinds it counts:\n%s", k.GVK.Kind, help)
		case !strings.Contains(help, k.GVK.Kind+" of "+k.GVK.GroupVersion().String()) && k.GVK.GroupVersion() != sednav1.SchemeGroupVersion:
			t.Errorf("--help does not name %s of %s:\n%s", k.GVK.Kind, k.GVK.GroupVersion(), help)
		}
	}
}
