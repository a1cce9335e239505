package testutil_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// maxFuncLines bounds a hand-written function of the library (issue 26):
// each stage of the engine, the canonicaliser and the generator can be
// read on a screen or two.
const maxFuncLines = 100

// TestNoLongHandWrittenFunctions fails when a function or method of a
// hand-written, non-test Go file of any module (generated files, which say
// so in their first lines, and testdata are left out) is longer than
// maxFuncLines lines, from its signature to its closing brace.
func TestNoLongHandWrittenFunctions(t *testing.T) {
	long, files := longFunctions(t, testutil.RepoRoot(), maxFuncLines)
	if files < 100 {
		t.Fatalf("read only %d Go files below %s", files, testutil.RepoRoot())
	}
	for _, l := range long {
		t.Errorf("%s: split it (at most %d lines per hand-written function)", l, maxFuncLines)
	}
}

// longFunctions lists the functions of the hand-written non-test Go files
// below root that are longer than limit lines, and counts the files read.
func longFunctions(t *testing.T, root string, limit int) (long []string, files int) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := end - start + 1; n > limit {
				long = append(long, fmt.Sprintf("%s:%d: %s is %d lines", rel, start, funcName(fn), n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return long, files
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
