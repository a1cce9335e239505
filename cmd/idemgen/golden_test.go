package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The golden cases live in golden/ at the repository root, one folder per
// positive case: the input spec, a generate.go whose //go:generate line
// holds the command (so `go generate ./golden/...` regenerates the case as
// a user would), and the expected idemgen_* files, which form a package
// that `go test ./...` compiles and exercises with its behaviour_test.go.
// Negative cases are txtar files in golden/errors (the input spec,
// optional args, and the expected stderr.txt; or, when args starts with
// lint, routes or spec, the expected stdout.txt of that command (routes and
// spec read the archive's idemgen.yaml when it has one); an optional exit file
// holds the exit status when it is not 1; a multi-file spec adds its
// other files, paths/orders.yaml...). `go test ./cmd/idemgen
// -update` rewrites both kinds.

func goldenDir() string { return filepath.Join(testutil.RepoRoot(), "golden") }

// caseArgs reads a case's args file: the flags, split on white space.
func caseArgs(t *testing.T, data []byte) []string {
	t.Helper()
	return strings.Fields(string(data))
}

const goGenerate = "//go:generate go run github.com/idemgen/idemgen/cmd/idemgen "

// generateLine returns the idemgen arguments of the case's generate.go.
func generateLine(t *testing.T, dir string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "generate.go"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, goGenerate); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("%s/generate.go has no %q line", dir, goGenerate)
	return nil
}

func TestGolden(t *testing.T) {
	entries, err := os.ReadDir(goldenDir())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "errors" || e.Name() == "internal" {
			continue
		}
		dir := filepath.Join(goldenDir(), e.Name())
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			continue // a module of its own, not a case (golden/routers: the cases with chi and gorilla/mux)
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			cmd := generateLine(t, dir)
			t.Chdir(dir)
			if !*testutil.Update {
				cmd = append(cmd, "-check")
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), cmd, nil, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("idemgen %s: exit %d\n%s%s\n(run go test ./cmd/idemgen -update to rewrite the golden files, then review the diff)",
					strings.Join(cmd, " "), code, stdout.String(), stderr.String())
			}
			if !*testutil.Update {
				if _, err := os.Stat("behaviour_test.go"); err != nil {
					t.Errorf("case %s has no behaviour_test.go exercising its generated code", e.Name())
				}
			}
		})
	}
	if n < 5 {
		t.Errorf("found %d golden cases, want at least 5", n)
	}
}

func TestGoldenErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir(), "errors", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no negative golden cases in golden/errors")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			var args []string
			spec := ""
			wantCode := 1
			outputs := map[string]int{} // stderr.txt, stdout.txt -> index
			for i, f := range ar.Files {
				switch {
				case f.Name == "args":
					args = caseArgs(t, f.Data)
				case f.Name == "exit":
					if wantCode, err = strconv.Atoi(strings.TrimSpace(string(f.Data))); err != nil {
						t.Fatal(err)
					}
				case f.Name == "stderr.txt" || f.Name == "stdout.txt":
					outputs[f.Name] = i
				default:
					if strings.HasPrefix(f.Name, "openapi.") {
						spec = f.Name
					}
					// A multi-file spec names its files with folders.
					name := filepath.Join(tmp, filepath.FromSlash(f.Name))
					if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(name, f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if spec == "" {
				t.Fatal("no openapi.* file in the archive")
			}
			if args == nil {
				args = []string{"-package", "api", "-store=false"}
			}
			cmd := append([]string{"generate", "-spec", spec, "-out", "out"}, args...)
			if len(args) > 0 {
				switch args[0] {
				case "lint":
					cmd = append([]string{"lint", "-spec", spec}, args[1:]...)
				case "routes", "spec":
					// With an idemgen.yaml in the archive the command reads
					// it (and its spec) instead of a -spec flag.
					cmd = append([]string{args[0], "-spec", spec}, args[1:]...)
					if _, err := os.Stat(filepath.Join(tmp, "idemgen.yaml")); err == nil {
						cmd = args
					}
				}
			}
			t.Chdir(tmp)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), cmd, nil, &stdout, &stderr)
			if code != wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, wantCode, stderr.String())
			}
			if _, err := os.Stat("out"); err == nil && wantCode != 0 {
				t.Errorf("a failed generation wrote the output folder")
			}
			got := map[string]string{"stdout.txt": stdout.String(), "stderr.txt": stderr.String()}
			if *testutil.Update {
				for _, name := range []string{"stdout.txt", "stderr.txt"} {
					i, ok := outputs[name]
					if !ok && got[name] == "" {
						continue
					}
					if !ok {
						ar.Files = append(ar.Files, txtar.File{Name: name})
						i = len(ar.Files) - 1
					}
					ar.Files[i].Data = []byte(got[name])
				}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, name := range []string{"stdout.txt", "stderr.txt"} {
				want := ""
				if i, ok := outputs[name]; ok {
					want = string(ar.Files[i].Data)
				}
				if got[name] != want {
					t.Errorf("%s differs (run with -update to rewrite)\n--- got\n%s--- want\n%s", name, got[name], want)
				}
			}
		})
	}
}
