// Package doclinks checks that the documentation's links resolve, so that a
// page moved or a heading renamed cannot leave a reader at a dead end. Its test
// runs the check on the repository (make test's unit step runs ./hack/...).
//
// What it checks:
//
//   - In README.md and every docs/**/*.md: each relative link, inline
//     ([text](target)) or by reference ([name]: target), names a file or
//     folder of the repository, and its #anchor, if any, a heading of that
//     page (GitHub's anchor for it) or an <a name|id> in it. Links with a
//     scheme (https:, mailto:) are not fetched. Code blocks and code spans are
//     not links.
//   - Anywhere in the repository's text files (Go, YAML, shell, Markdown,
//     templates, the Makefile), a mention of docs/<page>.md, or of
//     README.md#<anchor>, names a page that exists (and its anchor), so that
//     comments, flag help, chart values and event messages that send a reader
//     to a page send them somewhere. testdata folders are fixtures, and this
//     package's own examples are examples, not mentions.
package doclinks

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// self is this package's folder, whose sources and tests name pages that do
// not exist, as examples: they are no mentions.
const self = "hack/doclinks"

// Problem is one link that does not resolve.
type Problem struct {
	File   string // relative to the repository's root, with slashes
	Line   int
	Link   string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Link, p.Reason)
}

// Pages are the Markdown pages whose links are checked: README.md and every
// .md file under docs/, relative to root, with slashes.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	return pages, err
}

// Checker checks links against the files under one root, reading each page's
// anchors once.
type Checker struct {
	root    string
	anchors map[string]map[string]bool // page → its anchors
}

// NewChecker returns a Checker of the repository at root.
func NewChecker(root string) *Checker {
	return &Checker{root: root, anchors: map[string]map[string]bool{}}
}

var (
	// inlineLink is [text](target) or ![alt](target), with an optional title.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceLink is a reference definition: [name]: target.
	referenceLink = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is inline code, whose brackets are no link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	// htmlAnchor is an explicit anchor: <a name="x"> or an id="x".
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
	// scheme starts an absolute URL (https:, mailto:, …).
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// mention is a page named in any text: docs/<page>.md or README.md#anchor,
	// not as the tail of a longer path.
	mention = regexp.MustCompile(`(?:^|[^\w/.-])((?:docs/[\w./-]*\w\.md|README\.md)(?:#[\w-]+)?)`)
)

// CheckPage returns the links of page (relative to the root, with slashes)
// that do not resolve.
func (c *Checker) CheckPage(page string) ([]Problem, error) {
	data, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(page)))
	if err != nil {
		return nil, err
	}
	var problems []Problem
	forEachLine(data, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if reason := c.resolve(path.Dir(page), page, t); reason != "" {
				problems = append(problems, Problem{File: page, Line: n, Link: t, Reason: reason})
			}
		}
	})
	return problems, nil
}

// CheckMentions returns the mentions of docs/<page>.md and README.md#anchor in
// the text files under the root that name no page or anchor.
func (c *Checker) CheckMentions() ([]Problem, error) {
	var problems []Problem
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || name == "_output" || name == "testdata" || name == "node_modules" || rel == self) {
				return filepath.SkipDir
			}
			return nil
		}
		if !isText(name) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// Mentions are of paths from the root: a page's own relative links are
		// CheckPage's; docs/ pages linking one another say page.md, not docs/page.md.
		n := 0
		for line := range strings.Lines(string(data)) {
			n++
			for _, m := range mention.FindAllStringSubmatch(line, -1) {
				if reason := c.resolve("", rel, m[1]); reason != "" {
					problems = append(problems, Problem{File: rel, Line: n, Link: m[1], Reason: reason})
				}
			}
		}
		return nil
	})
	return problems, err
}

// isText says whether a file's mentions are checked, by its name.
func isText(name string) bool {
	switch name {
	case "Makefile", "Dockerfile":
		return true
	}
	for _, ext := range []string{".go", ".md", ".yaml", ".yml", ".sh", ".tpl", ".txt", ".json", ".Dockerfile"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// resolve says why target, a link in page (in folder dir; both relative to
// the root), does not resolve, or "" when it does.
func (c *Checker) resolve(dir, page, target string) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	file, anchor, hasAnchor := strings.Cut(target, "#")
	if strings.HasPrefix(file, "/") {
		return "an absolute path: link relative to the page"
	}
	if file == "" {
		file = page
	} else {
		file = path.Join(dir, file)
	}
	if file == ".." || strings.HasPrefix(file, "../") {
		return "outside the repository"
	}
	info, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return "no such file or folder"
	}
	if !hasAnchor {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(file, ".md") {
		return "" // GitHub's line anchors (#L10) and the like are not checked
	}
	anchors, err := c.pageAnchors(file)
	if err != nil {
		return err.Error()
	}
	if !anchors[anchor] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", file, anchor)
	}
	return ""
}

// pageAnchors returns the anchors of a page: GitHub's for each heading, and
// its explicit <a name|id> anchors.
func (c *Checker) pageAnchors(page string) (map[string]bool, error) {
	if a, ok := c.anchors[page]; ok {
		return a, nil
	}
	data, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(page)))
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachLine(data, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := Slug(m[1])
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
	})
	c.anchors[page] = anchors
	return anchors, nil
}

// forEachLine calls f with each line of a Markdown page (numbered from 1)
// that is not inside a fenced code block.
func forEachLine(data []byte, f func(n int, line string)) {
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	inCode := ""
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch inCode {
			case "":
				inCode = m[1]
			case m[1]:
				inCode = ""
			}
			continue
		}
		if inCode == "" {
			f(n, line)
		}
	}
}

// markup is what GitHub's rendering of a heading drops before its anchor is
// made: code span and emphasis markers, and a link's target.
var (
	headingLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	headingMarkup = strings.NewReplacer("`", "", "*", "")
)

// Slug is the anchor GitHub gives a heading of this text: lower case, each
// space a hyphen, and every character but letters, digits, marks, hyphens and
// underscores dropped ("Gang scheduling: a job's pods" →
// "gang-scheduling-a-jobs-pods").
func Slug(text string) string {
	text = headingLink.ReplaceAllString(text, "$1")
	text = headingMarkup.Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check returns every problem of the repository at root: the links of its
// pages and the mentions of pages in its text files, sorted by file and line.
func Check(root string) ([]Problem, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	c := NewChecker(root)
	var problems []Problem
	for _, p := range pages {
		ps, err := c.CheckPage(p)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	ps, err := c.CheckMentions()
	if err != nil {
		return nil, err
	}
	problems = append(problems, ps...)
	slices.SortFunc(problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.File, b.File), a.Line-b.Line, strings.Compare(a.Link, b.Link), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(problems), nil
}
