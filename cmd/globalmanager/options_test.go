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
	checkValidation(t, map[string]validationCase{
		"the defaults":           {},
		"another release":        {args: []string{"--edge-daemonset=edge/lc", "--edge-service-accounts=edge/lc"}},
		"empty":                  {args: []string{"--edge-daemonset="}, wantErr: `--edge-daemonset: "" is not namespace/name`},
		"no namespace":           {args: []string{"--edge-daemonset=lc"}, wantErr: `--edge-daemonset: "lc" is not namespace/name`},
		"another namespace":      {args: []string{"--edge-daemonset=edge/lc"}, wantErr: "nereid-system/nereid-localcontroller is not in the namespace of --edge-daemonset edge/lc"},
		"one account of several": {args: []string{"--edge-daemonset=edge/lc", "--edge-service-accounts=edge/lc,other/lc"}, wantErr: "other/lc is not in the namespace"},
	})
}

// The replicas API's own certificate holds the host DIJob pods dial: the
// URL must name one, over https.
func TestDIServerTLSSecretNeedsAnHTTPSURL(t *testing.T) {
	checkValidation(t, map[string]validationCase{
		"https":       {args: []string{"--di-server-tls-secret=di-tls", "--di-server-url=https://di.nereid-system.svc:8081"}},
		"http":        {args: []string{"--di-server-tls-secret=di-tls", "--di-server-url=http://di:8081"}, wantErr: "--di-server-tls-secret needs --di-server-url of the form https://"},
		"no URL":      {args: []string{"--di-server-tls-secret=di-tls"}, wantErr: "--di-server-tls-secret needs --di-server-url"},
		"a bad name":  {args: []string{"--di-server-tls-secret=Di_TLS", "--di-server-url=https://di:8081"}, wantErr: `--di-server-tls-secret "Di_TLS"`},
		"a cert file": {args: []string{"--di-server-tls-secret=di-tls", "--di-server-cert-file=c", "--di-server-key-file=k"}},
	})
}

type validationCase struct {
	args    []string
	wantErr string // "" for valid
}

// checkValidation parses each case's flags and checks what validate says.
func checkValidation(t *testing.T, cases map[string]validationCase) {
	t.Helper()
	for name, tc := range cases {
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
