package cloudlink

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"

	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// TestOutboxGaugesShowTheFillAndItsBounds reads the outbox gauges as
// Prometheus scrapes them, while the outbox fills and drains.
func TestOutboxGaugesShowTheFillAndItsBounds(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "lc.db"), store.Options{MaxOutboxReports: 3, MaxOutboxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := prometheus.NewRegistry()
	logger, _ := ktesting.NewTestContext(t)
	l, err := New(logger, Config{URL: "wss://gm:1" + ConnectPath, TokenFile: "/token", Node: "edge-1"}, st, reg)
	if err != nil {
		t.Fatal(err)
	}
	gauges := func() map[string]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			switch name := f.GetName(); name {
			case "nereid_cloudlink_outbox_reports", "nereid_cloudlink_outbox_bytes",
				"nereid_cloudlink_outbox_max_reports", "nereid_cloudlink_outbox_max_bytes":
				got[name] = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return got
	}
	want := func(reports, bytes float64) map[string]float64 {
		return map[string]float64{
			"nereid_cloudlink_outbox_reports": reports, "nereid_cloudlink_outbox_bytes": bytes,
			"nereid_cloudlink_outbox_max_reports": 3, "nereid_cloudlink_outbox_max_bytes": 100,
		}
	}

	steps := []struct {
		name        string
		do          func() error
		wantReports float64
		wantBytes   float64
	}{
		{"empty", func() error { return nil }, 0, 0},
		{"two reports", func() error {
			for _, r := range []string{"0123456789", "0123456789012345678901234567890123456789"} {
				if _, err := l.Outbox().AppendReport([]byte(r)); err != nil {
					return err
				}
			}
			return nil
		}, 2, 50},
		{"the first acknowledged", func() error { return st.AckReports(1) }, 1, 40},
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(want(step.wantReports, step.wantBytes), gauges()); diff != "" {
			t.Errorf("%s: gauges (-want,+got):\n%s", step.name, diff)
		}
	}
}
