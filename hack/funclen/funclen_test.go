package funclen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// No function of the repository is over Max lines but the allowed flag lists,
// and every allowed one still is (else its entry goes).
func TestNoFunctionIsOverAHundredLines(t *testing.T) {
	long, err := Long(root, Max)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range long {
		if _, ok := Allowed[f.Key()]; ok {
			seen[f.Key()] = true
			continue
		}
		t.Errorf("%s: split it (a test: its cases into a named table, its steps into helpers)", f)
	}
	for key := range Allowed {
		if !seen[key] {
			t.Errorf("Allowed[%q]: no such function over %d lines any more: remove the entry", key, Max)
		}
	}
}

func TestLongNamesEachLongFunctionAndSkipsGeneratedAndIgnoredFolders(t *testing.T) {
	got, err := Long("testdata/repo", 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []Func{
		{File: "pkg/x/x.go", Line: 4, Name: "six", Lines: 6},
		{File: "pkg/x/x.go", Line: 18, Name: "T.method", Lines: 7},
		{File: "pkg/x/x.go", Line: 26, Name: "G.generic", Lines: 6},
		{File: "pkg/x/x_test.go", Line: 5, Name: "TestLong", Lines: 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("long functions (-want,+got):\n%s", diff)
	}
}

func TestFuncSaysWhereWhatAndHowLong(t *testing.T) {
	f := Func{File: "pkg/x/x.go", Line: 4, Name: "T.method", Lines: 120}
	if got, want := f.String(), "pkg/x/x.go:4: T.method is 120 lines, want at most 100"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
