package doclinks

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// Every link of the README and docs/, and every mention of a docs/ page in
// the repository, resolves.
func TestRepositoryLinksResolve(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("pages %v: want README.md and docs/, or the check checks nothing", pages)
	}
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s", p)
	}
}

// The README is read in five minutes; the rest is in docs/.
func TestREADMEIsShort(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		lines++
	}
	if lines >= 250 {
		t.Errorf("README.md has %d lines, want under 250: move the detail to a page in docs/ and link it", lines)
	}
}

func TestCheckFindsEveryBrokenLinkAndNothingElse(t *testing.T) {
	problems, err := Check("testdata/repo")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:7: docs/gone.md: no such file or folder",
		"README.md:7: docs/a.md#third-heading: docs/a.md has no heading with the anchor #third-heading",
		"README.md:7: #nowhere: README.md has no heading with the anchor #nowhere",
		"README.md:14: docs/missing-ref.md: no such file or folder",
		"README.md:15: /docs/a.md: an absolute path: link relative to the page",
		"README.md:15: ../../README.md: outside the repository",
		"docs/a.md:10: b.md: no such file or folder",
		"pkg/x/x.go:2: README.md#nowhere: README.md has no heading with the anchor #nowhere",
		"pkg/x/x.go:2: docs/gone.md: no such file or folder",
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("problems (-want,+got):\n%s", diff)
	}
}

func TestSlugIsGitHubsAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Gang scheduling: a job's pods placed together or not at all": "gang-scheduling-a-jobs-pods-placed-together-or-not-at-all",
		"The cloud–edge channel and the LocalController":              "the-cloudedge-channel-and-the-localcontroller",
		"Where `helm` comes from":                                     "where-helm-comes-from",
		"IncrementalLearningJob: Train → Eval → Deploy → Train":       "incrementallearningjob-train--eval--deploy--train",
		"DI-engine's DIJob":                                           "di-engines-dijob",
		"Upgrading from [Sedna](https://example.com) v0.6":            "upgrading-from-sedna-v06",
		"make local_up, **fast**":                                     "make-local_up-fast",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
