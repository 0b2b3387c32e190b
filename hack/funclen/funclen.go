// Package funclen keeps functions short enough to read in one screen: its
// test fails naming every non-generated function of the repository that is
// over Max lines, unless Allowed names it with a reason (make test's unit step
// runs ./hack/...). A long test is split as the repository's other tests are:
// its cases into a named table next to it, its steps into helpers taking t and
// the fixture.
//
// What it reads: every .go file under the root, test files included, except
// generated ones (a "// Code generated ... DO NOT EDIT." line before the
// package clause, as go/ast.IsGenerated reads it) and except the folders the
// go command ignores or that are not Nereid's code: .git, .cache, _output,
// testdata, and any other name starting with "." or "_".
package funclen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Max is the most lines a function may have, from its func keyword to its
// closing brace.
const Max = 100

// Allowed are the functions that may be longer than Max, keyed by
// "<file, relative to the root, with slashes> <function>", with the reason.
// Only flag lists belong here: one line per flag, read as a list, gains
// nothing from being split.
var Allowed = map[string]string{
	"cmd/globalmanager/options.go options.addFlags": "a flag list: one registration per flag",
}

// Func is one function and its length.
type Func struct {
	File  string // relative to the root, with slashes
	Line  int    // of its func keyword
	Name  string // Name, or Recv.Name for a method
	Lines int
}

// Key is how Allowed names the function.
func (f Func) Key() string { return f.File + " " + f.Name }

func (f Func) String() string {
	return fmt.Sprintf("%s:%d: %s is %d lines, want at most %d", f.File, f.Line, f.Name, f.Lines, Max)
}

// Long returns the non-generated functions under root that are over max
// lines, by file and line.
func Long(root string, max int) ([]Func, error) {
	var long []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipped(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || !d.Type().IsRegular() {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", p, err)
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			if n := end - start + 1; n > max {
				long = append(long, Func{File: filepath.ToSlash(rel), Line: start, Name: name(fd), Lines: n})
			}
		}
		return nil
	})
	slices.SortFunc(long, func(a, b Func) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return long, err
}

// skipped says whether a folder is left out: the go command's own rule
// (testdata, names starting with "." or "_") covers .git, .cache and _output.
func skipped(dir string) bool {
	return dir == "testdata" || strings.HasPrefix(dir, ".") || strings.HasPrefix(dir, "_")
}

// name is the function's name, with its receiver's type for a method.
func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // a generic type's method
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
