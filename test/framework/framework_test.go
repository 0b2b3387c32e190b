package framework

import (
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestNamespaceNameIsADNSLabelNamedForTheTest(t *testing.T) {
	for name, tc := range map[string]struct {
		testName   string
		wantPrefix string
	}{
		"plain":         {testName: "TestFoo", wantPrefix: "testfoo-"},
		"subtest":       {testName: "TestFoo/bar_baz:qux", wantPrefix: "testfoo-bar-baz-qux-"},
		"symbols only":  {testName: "/__/", wantPrefix: "test-"},
		"too long":      {testName: "Test" + strings.Repeat("Long", 30), wantPrefix: "testlonglong"},
		"cut at a dash": {testName: strings.Repeat("a", 56) + "/b", wantPrefix: strings.Repeat("a", 56) + "-"},
	} {
		t.Run(name, func(t *testing.T) {
			got := namespaceName(tc.testName)
			if !dnsLabel.MatchString(got) || len(got) > 63 {
				t.Errorf("namespaceName(%q) = %q, not a DNS label", tc.testName, got)
			}
			if !strings.HasPrefix(got, tc.wantPrefix) {
				t.Errorf("namespaceName(%q) = %q, want prefix %q", tc.testName, got, tc.wantPrefix)
			}
			if again := namespaceName(tc.testName); again == got {
				t.Errorf("namespaceName(%q) gave %q twice; want a random suffix", tc.testName, got)
			}
		})
	}
}

func TestDeclaresModuleReadsTheModuleLine(t *testing.T) {
	for name, tc := range map[string]struct {
		goMod string
		want  bool
	}{
		"ours":          {goMod: "module github.com/nereid-ml/nereid\n\ngo 1.26\n", want: true},
		"quoted":        {goMod: "module \"github.com/nereid-ml/nereid\"\n", want: true},
		"a tool module": {goMod: "// c\nmodule github.com/nereid-ml/nereid/hack/tools/kube\n", want: false},
		"no module":     {goMod: "go 1.26\n", want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := declaresModule([]byte(tc.goMod), module); got != tc.want {
				t.Errorf("declaresModule(%q) = %v, want %v", tc.goMod, got, tc.want)
			}
		})
	}
}

// TestFreePortsAreNoneTheKernelOrAControlPlaneGives: ports FreePort picks
// lie below the control planes' blocks and the ephemeral range, differ from
// each other, and can be bound.
func TestFreePortsAreNoneTheKernelOrAControlPlaneGives(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port := FreePort(t)
		if port < freePortFirst || port >= freePortFirst+freePortCount || port >= 20000 {
			t.Fatalf("FreePort gave %d, want one in %d..%d (below 20000)", port, freePortFirst, freePortFirst+freePortCount-1)
		}
		if seen[port] {
			t.Fatalf("FreePort gave %d twice", port)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d from FreePort: %v", port, err)
		}
		ln.Close()
	}
}
