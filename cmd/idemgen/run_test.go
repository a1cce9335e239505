package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: true
      responses: {"200": {description: ok}}
`

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeSpec(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "openapi.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUsageAndVersion(t *testing.T) {
	if code, _, errs := runCLI(t, ""); code != 2 || !strings.Contains(errs, "Usage:") {
		t.Errorf("no args: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errs)
	}
	code, out, _ := runCLI(t, "", "--help")
	if code != 0 || !strings.Contains(out, "idemgen generate -spec") || !strings.Contains(out, "//go:generate") {
		t.Errorf("--help: exit %d, stdout %q", code, out)
	}
	// The version the generated headers carry (generator.Version).
	if code, out, _ := runCLI(t, "", "version"); code != 0 || out != "idemgen "+generator.Version()+"\n" {
		t.Errorf("version: exit %d, stdout %q", code, out)
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", "x.yaml", "-out", "o"); code != 2 || !strings.Contains(errs, "missing -dialect") {
		t.Errorf("no dialect: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "generate", "-bogus"); code != 2 || !strings.Contains(errs, "-bogus") {
		t.Errorf("bad flag: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", "x.yaml", "-out", "o", "-dialect", "oracle"); code != 2 || !strings.Contains(errs, "oracle") {
		t.Errorf("bad dialect: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", "x.yaml", "-out", "o", "-dialect", "postgres", "-table", "Drop Table"); code != 2 || !strings.Contains(errs, "table name") {
		t.Errorf("bad table: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "generate", "-h"); code != 0 || !strings.Contains(errs, "Example:") {
		t.Errorf("generate -h: exit %d, stderr %q", code, errs)
	}
}

func TestGenerateWriteCheckAndClean(t *testing.T) {
	dir := t.TempDir()
	specPath := writeSpec(t, dir, spec)
	out := filepath.Join(dir, "internal", "idem")
	args := []string{"generate", "-spec", specPath, "-out", out, "-store=false"}

	// -check before anything is written: missing.
	code, stdout, _ := runCLI(t, "", append(args, "-check")...)
	if code != 1 || !strings.Contains(stdout, "missing: "+filepath.Join(out, "idemgen_policies.go")) {
		t.Fatalf("check on empty dir: exit %d, stdout %q", code, stdout)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("-check wrote the output folder")
	}

	if code, _, errs := runCLI(t, "", args...); code != 0 {
		t.Fatalf("generate: exit %d, %s", code, errs)
	}
	src, err := os.ReadFile(filepath.Join(out, "idemgen_policies.go"))
	if err != nil || !bytes.Contains(src, []byte("package idem\n")) {
		t.Fatalf("package name defaults to the folder's: %v\n%s", err, src)
	}
	if code, stdout, _ := runCLI(t, "", append(args, "-check")...); code != 0 || stdout != "" {
		t.Errorf("check after generate: exit %d, stdout %q", code, stdout)
	}

	// A stale file, an extra idemgen_ file, and a user's own file.
	os.WriteFile(filepath.Join(out, "idemgen_policies.go"), []byte("package idem\n"), 0o644)
	os.WriteFile(filepath.Join(out, "idemgen_old.go"), []byte("package idem\n"), 0o644)
	os.WriteFile(filepath.Join(out, "handlers.go"), []byte("package idem\n"), 0o644)
	code, stdout, errs := runCLI(t, "", append(args, "-check")...)
	if code != 1 || !strings.Contains(stdout, "stale: "+filepath.Join(out, "idemgen_policies.go")) ||
		!strings.Contains(stdout, "extra: "+filepath.Join(out, "idemgen_old.go")) || strings.Contains(stdout, "handlers.go") {
		t.Errorf("check: exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	if code, _, _ := runCLI(t, "", args...); code != 0 {
		t.Fatal("regenerate failed")
	}
	if _, err := os.Stat(filepath.Join(out, "idemgen_old.go")); err == nil {
		t.Error("a stale idemgen_ file was not removed")
	}
	if _, err := os.Stat(filepath.Join(out, "handlers.go")); err != nil {
		t.Error("the user's own file was removed")
	}
	if got, _ := os.ReadFile(filepath.Join(out, "idemgen_policies.go")); !bytes.Equal(got, src) {
		t.Error("regenerating did not restore the file")
	}
}

func TestSpecErrorsExitOne(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeSpec(t, dir, strings.Replace(spec, "x-idempotent: true", "x-idempotent: {ttl: soon}", 1))
	code, _, errs := runCLI(t, "", "generate", "-spec", "openapi.yaml", "-out", "o", "-package", "api", "-store=false")
	if code != 1 || errs != "openapi.yaml:7:22: x-idempotent.ttl: \"soon\" is not a duration (want e.g. 24h)\n" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", "nope.yaml", "-out", "o", "-store=false"); code != 1 || !strings.Contains(errs, "nope.yaml") {
		t.Errorf("missing spec: exit %d, stderr %q", code, errs)
	}
}

// TestWarningsDoNotFail: a warning is printed as file:line:col: warning: ...
// on stderr, and the files are written (exit 0).
func TestWarningsDoNotFail(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	shared := strings.Replace(spec, "info: {title: t, version: \"1\"}\n", "info: {title: t, version: \"1\"}\nsecurity: [{k: []}]\ncomponents: {securitySchemes: {k: {type: apiKey, in: header, name: K}}}\n", 1)
	shared = strings.Replace(shared, "x-idempotent: true", "x-idempotent: {principal: anonymous}", 1)
	writeSpec(t, dir, shared)
	code, _, errs := runCLI(t, "", "generate", "-spec", "openapi.yaml", "-out", "o", "-package", "api", "-store=false")
	if code != 0 || !strings.HasPrefix(errs, "openapi.yaml:9:22: warning: x-idempotent: principal anonymous") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "o", "idemgen_policies.go")); err != nil {
		t.Error(err)
	}
}

func TestSpecFromStdin(t *testing.T) {
	out := t.TempDir()
	code, _, errs := runCLI(t, spec, "generate", "-spec", "-", "-out", out, "-package", "api", "-store=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(out, "idemgen_policies.go")); err != nil {
		t.Error(err)
	}
}

func TestAnnotateMutating(t *testing.T) {
	bare := strings.Replace(spec, "      x-idempotent: true\n", "", 1)
	dir := t.TempDir()
	specPath := writeSpec(t, dir, bare)
	out := filepath.Join(dir, "out")
	code, _, errs := runCLI(t, "", "generate", "-spec", specPath, "-out", out, "-package", "api", "-store=false",
		"-annotate-mutating", `{"principal":"anonymous","ttl":"1h"}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	src, _ := os.ReadFile(filepath.Join(out, "idemgen_policies.go"))
	if !bytes.Contains(src, []byte("var CreateOrderPolicy")) || !bytes.Contains(src, []byte("time.Hour")) {
		t.Errorf("the overlay was not applied:\n%s", src)
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", specPath, "-out", out, "-store=false", "-annotate-mutating", "[1]"); code != 2 || !strings.Contains(errs, "-annotate-mutating") {
		t.Errorf("bad overlay: exit %d, stderr %q", code, errs)
	}
	// A bad field in the flag is a usage error, reported once, not at every
	// operation it would annotate.
	code, _, errs = runCLI(t, "", "generate", "-spec", specPath, "-out", out, "-store=false", "-annotate-mutating", `{"tll":"1h","scope":"all"}`)
	want := "idemgen generate: -annotate-mutating: x-idempotent.scope: a scope cannot be shared by every operation; set it on the operation\n" +
		"idemgen generate: -annotate-mutating: x-idempotent: unknown field \"tll\" (did you mean \"ttl\"?)\n"
	if code != 2 || errs != want {
		t.Errorf("overlay with bad fields: exit %d, stderr:\n%s\nwant:\n%s", code, errs, want)
	}
}

func TestLint(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeSpec(t, dir, `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {ttl: 1h}
      responses: {"200": {description: ok}}
    get:
      responses: {"200": {description: ok}}
  /orders/{id}:
    put:
      operationId: replaceOrder
      x-idempotent: false
      responses: {"200": {description: ok}}
    delete:
      operationId: deleteOrder
      responses: {"200": {description: ok}}
    patch:
      x-idempotent: {ttl: soon}
      responses: {"200": {description: ok}}
`)
	code, out, errs := runCLI(t, "", "lint", "-spec", "openapi.yaml")
	want := "openapi.yaml:16:5: finding: operation DELETE /orders/{id} (deleteOrder) is not annotated: add x-idempotent, or x-idempotent: false if it is idempotent by nature\n" +
		"openapi.yaml:20:22: x-idempotent.ttl: \"soon\" is not a duration (want e.g. 24h)\n"
	if code != 1 || out != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errs)
	}
	writeSpec(t, dir, spec)
	if code, out, _ := runCLI(t, "", "lint", "-spec", "openapi.yaml"); code != 0 || out != "" {
		t.Errorf("clean spec: exit %d, stdout %q", code, out)
	}
	if code, _, _ := runCLI(t, "", "lint"); code != 2 {
		t.Errorf("lint without -spec: exit %d", code)
	}
}

func TestBasePathFlag(t *testing.T) {
	dir := t.TempDir()
	specPath := writeSpec(t, dir, strings.Replace(spec, "paths:", "servers: [{url: https://api.x/v1}]\npaths:", 1))
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string // the BasePaths line; empty: none (the root)
	}{
		{nil, `BasePaths:   []string{"/v1"},`},
		{[]string{"-base-path", "/api"}, `BasePaths:   []string{"/api"},`},
		{[]string{"-base-path", "/api", "-base-path", "/v2"}, `BasePaths:   []string{"/api", "/v2"},`},
		{[]string{"-base-path", "/"}, ""},
		{[]string{"-base-path", ""}, ""},
	} {
		args := append([]string{"generate", "-spec", specPath, "-out", out, "-package", "api", "-store=false"}, c.args...)
		if code, _, errs := runCLI(t, "", args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", c.args, code, errs)
		}
		src, _ := os.ReadFile(filepath.Join(out, "idemgen_policies.go"))
		if c.want == "" && bytes.Contains(src, []byte("BasePaths:")) || c.want != "" && !bytes.Contains(src, []byte(c.want)) {
			t.Errorf("%q: want %q in:\n%s", c.args, c.want, src)
		}
	}
	if code, _, errs := runCLI(t, "", "generate", "-spec", specPath, "-out", out, "-store=false", "-base-path", "api"); code != 2 || !strings.Contains(errs, `base path "api"`) {
		t.Errorf("-base-path api: exit %d, stderr %q", code, errs)
	}
}

// TestNoEmptyFiles: every file generate writes has content beyond its
// header and package clause, and the empty idemgen_models.go earlier
// versions wrote is removed from an existing output.
func TestNoEmptyFiles(t *testing.T) {
	for _, dialect := range []string{"postgres", "sqlite", "mysql"} {
		dir := t.TempDir()
		specPath := writeSpec(t, dir, spec)
		out := filepath.Join(dir, "idem")
		os.MkdirAll(out, 0o755)
		old := "// Code generated by sqlc. DO NOT EDIT.\n// versions:\n//   sqlc v1.31.1\n\npackage idem\n"
		if err := os.WriteFile(filepath.Join(out, "idemgen_models.go"), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errs := runCLI(t, "", "generate", "-spec", specPath, "-out", out, "-dialect", dialect); code != 0 {
			t.Fatalf("%s: exit %d, %s", dialect, code, errs)
		}
		if _, err := os.Stat(filepath.Join(out, "idemgen_models.go")); err == nil {
			t.Errorf("%s: the empty idemgen_models.go was left in place", dialect)
		}
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(out, e.Name()))
			if !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), e.Name(), b, 0)
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			if len(f.Decls) == 0 {
				t.Errorf("%s: %s declares nothing", dialect, e.Name())
			}
		}
	}
}

// TestCheckVersion: files written by another idemgen version are stale to
// -check (the marker names the version), and regenerating rewrites them.
func TestCheckVersion(t *testing.T) {
	dir := t.TempDir()
	specPath := writeSpec(t, dir, spec)
	out := filepath.Join(dir, "idem")
	args := []string{"generate", "-spec", specPath, "-out", out, "-dialect", "sqlite"}
	if code, _, errs := runCLI(t, "", args...); code != 0 {
		t.Fatalf("generate: exit %d, %s", code, errs)
	}
	mine := "Code generated by idemgen " + generator.Version() + ". DO NOT EDIT."
	entries, _ := os.ReadDir(out)
	marked := 0
	for _, e := range entries {
		p := filepath.Join(out, e.Name())
		b, _ := os.ReadFile(p)
		if !bytes.Contains(b, []byte(mine)) {
			continue
		}
		marked++
		os.WriteFile(p, bytes.Replace(b, []byte(mine), []byte("Code generated by idemgen v0.9.0. DO NOT EDIT."), 1), 0o644)
	}
	if marked != 7 { // policies, store, outbox, sweep, schema, queries, sqlc.yaml
		t.Errorf("%d files carry %q, want 7", marked, mine)
	}
	code, stdout, _ := runCLI(t, "", append(args, "-check")...)
	if code != 1 || strings.Count(stdout, "stale: ") != marked || !strings.Contains(stdout, "-// Code generated by idemgen v0.9.0. DO NOT EDIT.") {
		t.Errorf("check after another version: exit %d, stdout %q", code, stdout)
	}
	if code, _, _ := runCLI(t, "", args...); code != 0 {
		t.Fatal("regenerate failed")
	}
	if code, stdout, _ := runCLI(t, "", append(args, "-check")...); code != 0 {
		t.Errorf("check after regenerating: exit %d, stdout %q", code, stdout)
	}
}
