package main

import (
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"github.com/nereid-ml/nereid/test/e2e","Test":"TestA"}
# a line of build output
{"Action":"pass","Package":"github.com/nereid-ml/nereid/test/e2e","Test":"TestA/sub","Elapsed":9}
{"Action":"pass","Package":"github.com/nereid-ml/nereid/test/e2e","Test":"TestA","Elapsed":12.5}
{"Action":"fail","Package":"github.com/nereid-ml/nereid/test/e2e","Test":"TestB","Elapsed":30}
{"Action":"skip","Package":"github.com/nereid-ml/nereid/test/e2e","Test":"TestC","Elapsed":0}
{"Action":"fail","Package":"github.com/nereid-ml/nereid/test/e2e","Elapsed":35.2}
{"Action":"pass","Package":"github.com/nereid-ml/nereid/test/framework","Elapsed":0.01}
`

// TestTimesListsTheSlowestTopLevelTestsAndThePackages: subtests and build
// output are left out, the slowest comes first with how it ended when it
// did not pass, and packages under a second are not listed.
func TestTimesListsTheSlowestTopLevelTestsAndThePackages(t *testing.T) {
	tests, packages, err := read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 3 || len(packages) != 2 {
		t.Fatalf("%d tests, %d packages; want 3 and 2", len(tests), len(packages))
	}
	var b strings.Builder
	write(&b, tests, packages, 2)
	out := b.String()
	for _, want := range []string{
		"| 1 | TestB (fail) | test/e2e | 30.0 |\n| 2 | TestA | test/e2e | 12.5 |\n\n",
		"3 top-level tests, 42 s of test time in all.",
		"| test/e2e | 35.2 | fail |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TestC") || strings.Contains(out, "test/framework") {
		t.Errorf("output lists more than the top 2 tests or a package under 1 s:\n%s", out)
	}
}
