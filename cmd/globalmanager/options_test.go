package main

import (
	"flag"
	"strings"
	"testing"
)

func TestGCPercentDefaultsTo50AndMustBePositive(t *testing.T) {
	parse := func(args ...string) options {
		var o options
		fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := parse(); o.gcPercent != 50 {
		t.Errorf("--gc-percent defaults to %d, want 50", o.gcPercent)
	} else if err := o.validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	for _, bad := range []string{"0", "-1"} {
		o := parse("--gc-percent=" + bad)
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), "--gc-percent "+bad) {
			t.Errorf("--gc-percent=%s: error %v, want one naming the flag and its value", bad, err)
		}
	}
}

// The hub accepts only the Pods of one DaemonSet, which must be named, in
// the ServiceAccounts' namespace.
func TestEdgeDaemonSetMustBeNamedBesideTheServiceAccounts(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		wantErr string // "" for valid
	}{
		"the defaults":           {},
		"another release":        {args: []string{"--edge-daemonset=edge/lc", "--edge-service-accounts=edge/lc"}},
		"empty":                  {args: []string{"--edge-daemonset="}, wantErr: `--edge-daemonset: "" is not namespace/name`},
		"no namespace":           {args: []string{"--edge-daemonset=lc"}, wantErr: `--edge-daemonset: "lc" is not namespace/name`},
		"another namespace":      {args: []string{"--edge-daemonset=edge/lc"}, wantErr: "nereid-system/nereid-localcontroller is not in the namespace of --edge-daemonset edge/lc"},
		"one account of several": {args: []string{"--edge-daemonset=edge/lc", "--edge-service-accounts=edge/lc,other/lc"}, wantErr: "other/lc is not in the namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			var o options
			fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}
