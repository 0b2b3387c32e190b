package register

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

func TestConversionFlagsAreChecked(t *testing.T) {
	cases := map[string]struct {
		flags   conversionFlags
		wantErr string
	}{
		"off":                         {flags: conversionFlags{}},
		"a loopback port":             {flags: conversionFlags{address: "127.0.0.1:0", tlsSecret: DefaultConversionTLSSecret}},
		"a Service":                   {flags: conversionFlags{address: ":9443", service: "nereid-system/nereid-dijob-conversion:443", tlsSecret: "s"}},
		"an address without port":     {flags: conversionFlags{address: "127.0.0.1", tlsSecret: "s"}, wantErr: "--dijob-conversion-address"},
		"a Service without namespace": {flags: conversionFlags{address: ":9443", service: "svc:443", tlsSecret: "s"}, wantErr: "want <namespace>/<name>:<port>"},
		"a Service without port":      {flags: conversionFlags{address: ":9443", service: "ns/svc", tlsSecret: "s"}, wantErr: "want <namespace>/<name>:<port>"},
		"a port out of range":         {flags: conversionFlags{address: ":9443", service: "ns/svc:70000", tlsSecret: "s"}, wantErr: "want <namespace>/<name>:<port>"},
		"a Secret name that is not":   {flags: conversionFlags{address: ":9443", tlsSecret: "Not_A_Name"}, wantErr: "--dijob-conversion-tls-secret"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tc.flags.validate(), tc.wantErr)
		})
	}
}

func TestTheWebhooksURLHost(t *testing.T) {
	for address, want := range map[string]string{":9443": "127.0.0.1", "0.0.0.0:9443": "127.0.0.1", "[::]:1": "127.0.0.1", "127.0.0.1:0": "127.0.0.1", "10.0.0.5:9443": "10.0.0.5"} {
		if got := urlHost(address); got != want {
			t.Errorf("urlHost(%q) = %q, want %q", address, got, want)
		}
	}
	ref, err := parseServiceReference("ml/r-dijob-conversion:443")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&conversion.ServiceReference{Namespace: "ml", Name: "r-dijob-conversion", Port: 443}, ref); diff != "" {
		t.Errorf("parseServiceReference (-want,+got):\n%s", diff)
	}
}

// checkValidate checks a flag set's validate() errors: none when wantErr
// is empty, else the first one contains wantErr.
func checkValidate(t *testing.T, errs []error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && len(errs) > 0:
		t.Errorf("validate() = %v, want none", errs)
	case wantErr != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), wantErr)):
		t.Errorf("validate() = %v, want an error with %q", errs, wantErr)
	}
}
