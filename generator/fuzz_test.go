package generator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// FuzzGenerate feeds mutated documents to Generate: it must return files
// or an error, never panic, and its errors must be Diagnostics (a spec
// problem) since the configuration is fixed and valid.
//
//	go test ./generator -run '^$' -fuzz FuzzGenerate -fuzztime 60s
func FuzzGenerate(f *testing.F) {
	f.Add([]byte(minimal))
	for _, pattern := range []string{"golden/*/openapi.*", "golden/errors/*.txtar"} {
		files, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(), pattern))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		res, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: spec, Package: "api", SkipStore: true})
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not Diagnostics: %v", err)
			}
			for _, d := range ds {
				if d.Pos.File == "" || d.Msg == "" {
					t.Fatalf("diagnostic without a place or a message: %+v", d)
				}
			}
			return
		}
		if len(res.Files[PoliciesFile]) == 0 {
			t.Fatal("no policies file")
		}
	})
}

func TestLocateNeverPanics(t *testing.T) {
	for _, text := range []string{`x: {"a: 1`, "x:\n  'a", "x:", "{", "x: {$ref: '#/x'}", "x:\n  $ref: '#/x/y'\n", "---\n", "x: {a: [}", `{"x": {"a": "\"}`} {
		fs := testFiles(text)
		for _, keys := range [][]string{{"x"}, {"x", "a"}, {"x", "a", "b"}, {"x", "y", "z"}} {
			fs.find(keys...)
		}
		fs.main.Frame(Pos{Line: 1, Col: 99})
		fs.main.Frame(Pos{Line: 9, Col: 1})
		fs.main.Frame(Pos{Line: 1, Col: 1})
	}
}

// testFiles is a spec of one file, s.yaml, and the files named in more
// (name, text, name, text...).
func testFiles(main string, more ...string) *specFiles {
	fs := newSpecFiles(Config{Spec: "s.yaml"}, []byte(main))
	for i := 0; i+1 < len(more); i += 2 {
		fs.add(more[i], []byte(more[i+1]))
	}
	return fs
}

// FuzzLocate: finding keys in any text, through any $refs, and showing
// any position, never panics.
//
//	go test ./generator -run '^$' -fuzz FuzzLocate -fuzztime 200000x
func FuzzLocate(f *testing.F) {
	f.Add([]byte(minimal), "paths", "/b", "post", "x-idempotent")
	f.Add([]byte(`{"paths": {"/a": {"$ref": "#/x"}}, "x": {"post": {"x-idempotent": {"ttl": 1}}}}`), "paths", "/a", "post", "x-idempotent")
	f.Add([]byte("a:\n  $ref: other.yaml#/b\n"), "a", "b", "c", "d")
	f.Fuzz(func(t *testing.T, text []byte, k1, k2, k3, k4 string) {
		fs := testFiles(string(text), "other.yaml", string(text))
		p := fs.find(k1, k2, k3, k4)
		fs.main.Frame(p)
		if p.Line > 0 {
			if off := fs.main.Offset(p.Line, p.Col); off < 0 {
				t.Fatalf("%v is not in the text", p)
			}
		}
	})
}
