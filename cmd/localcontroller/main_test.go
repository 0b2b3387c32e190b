package main

import (
	"strings"
	"testing"
)

func TestOptionsValidateNamesMissingFlags(t *testing.T) {
	cases := map[string]struct {
		o        options
		wantErrs []string
	}{
		"complete":    {o: options{nodeName: "edge-0", gmAddress: "127.0.0.1:10000", dataDir: "/var/lib/nereid"}},
		"nothing":     {o: options{}, wantErrs: []string{"--node-name", "--data-dir"}},
		"no data dir": {o: options{nodeName: "edge-0"}, wantErrs: []string{"--data-dir"}},
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
