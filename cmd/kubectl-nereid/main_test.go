package main

import (
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// run dispatches to the command named, with the exit codes kubectl plugins
// use: 0 done, 1 failed, 2 bad usage; --help lists every command.
func TestRunDispatchesAndExitsAsDocumented(t *testing.T) {
	for name, tc := range map[string]struct {
		args                []string
		wantCode            int
		wantOut, wantErrOut string
	}{
		"help lists the commands": {args: []string{"--help"}, wantCode: 0,
			wantOut: "  status       The edge fleet's links"},
		"help lists rounds":    {args: []string{"help"}, wantCode: 0, wantOut: "  rounds       "},
		"no command is usage":  {args: nil, wantCode: 2, wantOut: "Commands:\n  status"},
		"an unknown command":   {args: []string{"statsu"}, wantCode: 2, wantErrOut: `kubectl nereid: unknown command "statsu"`},
		"a command's help":     {args: []string{"nodes", "--help"}, wantCode: 0, wantErrOut: "Usage: kubectl nereid nodes"},
		"a bad flag":           {args: []string{"status", "--bogus"}, wantCode: 2, wantErrOut: "kubectl nereid status: flag provided but not defined: -bogus"},
		"a bad output":         {args: []string{"nodes", "-o", "yaml"}, wantCode: 2, wantErrOut: "want json"},
		"unexpected arguments": {args: []string{"status", "extra"}, wantCode: 2, wantErrOut: `unexpected arguments ["extra"]`},
		"rounds without a job": {args: []string{"rounds"}, wantCode: 2, wantErrOut: "kubectl nereid rounds: want one job"},
		"rounds in all namespaces": {args: []string{"rounds", "fl/x", "-A"}, wantCode: 2,
			wantErrOut: "rounds reads one job; name its namespace with -n"},
		"flags before the command": {args: []string{"-n", "demo", "--kubeconfig=/nonexistent/kubeconfig", "status"}, wantCode: 1,
			wantErrOut: "kubectl nereid status: loading the kubeconfig"},
		"a bad flag before the command": {args: []string{"-o", "json", "--bogus", "nodes"}, wantCode: 2,
			wantErrOut: "kubectl nereid nodes: flag provided but not defined: -bogus"},
		"no kubeconfig fails": {args: []string{"status", "--kubeconfig", "/nonexistent/kubeconfig"}, wantCode: 1,
			wantErrOut: "kubectl nereid status: loading the kubeconfig"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := run(t.Context(), &cli.Env{Stdout: &out, Stderr: &errOut}, tc.args)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout %q, want it to hold %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErrOut) {
				t.Errorf("stderr %q, want it to hold %q", errOut.String(), tc.wantErrOut)
			}
		})
	}
}
