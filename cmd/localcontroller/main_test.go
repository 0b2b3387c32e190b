package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

func TestOptionsValidateNamesMissingFlags(t *testing.T) {
	cases := map[string]struct {
		o        options
		wantErrs []string
	}{
		"complete": {o: options{nodeName: "edge-0", gmAddress: "127.0.0.1:10000", dataDir: "/var/lib/nereid",
			nodeRoot: "/", datasetPollPeriod: 10 * time.Second}},
		"nothing":     {o: options{}, wantErrs: []string{"--node-name", "--data-dir", "--node-root", "--dataset-poll-period"}},
		"no data dir": {o: options{nodeName: "edge-0", nodeRoot: "/", datasetPollPeriod: time.Second}, wantErrs: []string{"--data-dir"}},
		"negative poll period": {o: options{nodeName: "edge-0", dataDir: "/d", nodeRoot: "/", datasetPollPeriod: -time.Second},
			wantErrs: []string{"--dataset-poll-period"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.o.validate()
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate accepted %+v", tc.o)
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestFileClockReadsTheFileAtEveryCallAndFallsBackToTheSystemClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	clk := newFileClock(klog.Background(), path)

	before := time.Now()
	if got := clk.Now(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("without the file: %v, want the system clock", got)
	}
	for _, want := range []string{"2025-03-01T23:00:00+01:00", "2025-03-02T06:30:00Z"} {
		if err := os.WriteFile(path, []byte(want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := clk.Now().Format(time.RFC3339); got != want {
			t.Errorf("clk.Now() = %s, want %s", got, want)
		}
	}
	if err := os.WriteFile(path, []byte("tomorrow"), 0o644); err != nil {
		t.Fatal(err)
	}
	before = time.Now()
	if got := clk.Now(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("with an unparsable file: %v, want the system clock", got)
	}
}

// --help lists every LocalController flag and keeps klog's apart;
// --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	var o options
	commandtest.CheckHelp(t, commandtest.FlagNames(o.addFlags), true)
	commandtest.CheckVersion(t, "nereid-localcontroller")
}
