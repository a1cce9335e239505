package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/testutil"
)

// specCase is one `idemgen spec` //go:generate line of a golden case or
// an example: the published spec (or overlay) it writes is committed next
// to its input, and this test checks it is what idemgen spec writes now
// (-update rewrites it, as go generate does).
type specCase struct {
	dir  string
	args []string
}

func (c specCase) flag(name string) string {
	for i, a := range c.args {
		if a == name && i+1 < len(c.args) {
			return c.args[i+1]
		}
	}
	return ""
}

func (c specCase) overlay() bool { return strings.Contains(strings.Join(c.args, " "), "-overlay") }

func specCases(t *testing.T) []specCase {
	t.Helper()
	root := testutil.RepoRoot()
	files, _ := filepath.Glob(filepath.Join(root, "golden", "*", "generate.go"))
	more, _ := filepath.Glob(filepath.Join(root, "examples", "*", "main.go"))
	var out []specCase
	for _, f := range append(files, more...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(src)) {
			if rest, ok := strings.CutPrefix(line, goGenerate+"spec "); ok {
				out = append(out, specCase{dir: filepath.Dir(f), args: strings.Fields(rest)})
			}
		}
	}
	return out
}

func TestSpecGolden(t *testing.T) {
	cases := specCases(t)
	var merged, overlays int
	for _, c := range cases {
		if c.overlay() {
			overlays++
		} else {
			merged++
		}
		name := filepath.Base(c.dir) + "/" + c.flag("-o")
		t.Run(name, func(t *testing.T) {
			t.Chdir(c.dir)
			args := append([]string{"spec"}, c.args...)
			if !*testutil.Update {
				args = append(args, "-check")
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("idemgen %s: exit %d\n%s%s(run go test ./cmd/idemgen -update to rewrite, then review the diff)", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
		})
	}
	if merged < 2 || overlays < 2 {
		t.Errorf("found %d merged and %d overlay spec cases, want at least 2 of each (payments, webhooks31)", merged, overlays)
	}
}

// TestPublishedValidates loads every committed published spec with
// kin-openapi and validates it, and checks that each annotated operation
// now documents its key parameter (header or query) and its problems.
func TestPublishedValidates(t *testing.T) {
	for _, c := range specCases(t) {
		if c.overlay() {
			continue
		}
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			loader := openapi3.NewLoader()
			doc, err := loader.LoadFromFile(filepath.Join(c.dir, c.flag("-o")))
			if err != nil {
				t.Fatal(err)
			}
			if err := doc.Validate(context.Background()); err != nil {
				t.Fatalf("the published spec does not validate: %v", err)
			}
			if doc.Components == nil || doc.Components.Schemas["IdempotencyProblem"] == nil || doc.Components.Headers["Idempotent-Replayed"] == nil {
				t.Fatal("components lack the problem schema or the Idempotent-Replayed header")
			}
			n := 0
			check := func(what string, op *openapi3.Operation) {
				ext, ok := op.Extensions["x-idempotent"].(map[string]any)
				if !ok {
					return
				}
				n++
				key, _ := ext["key"].(map[string]any)
				for _, field := range []string{"key", "required", "scope", "principal", "ttl"} {
					if _, ok := ext[field]; !ok {
						t.Errorf("%s: x-idempotent has no %s: %v", what, field, ext)
					}
				}
				if name, ok := key["header"].(string); ok && !hasParam(op, "header", name) {
					t.Errorf("%s: no header parameter %s", what, name)
				}
				for _, status := range []int{400, 409, 413, 422, 503} {
					if op.Responses.Status(status) == nil {
						t.Errorf("%s: no %d response", what, status)
					}
				}
			}
			for path, item := range doc.Paths.Map() {
				for m, op := range item.Operations() {
					check(m+" "+path, op)
				}
			}
			for name, item := range doc.Webhooks {
				for m, op := range item.Operations() {
					check("webhook "+name+" "+m, op)
				}
			}
			if n == 0 {
				t.Fatal("no annotated operation in the published spec")
			}
		})
	}
}

func hasParam(op *openapi3.Operation, in, name string) bool {
	for _, p := range op.Parameters {
		if p.Value != nil && p.Value.In == in && strings.EqualFold(p.Value.Name, name) {
			return true
		}
	}
	return false
}

// TestOverlayMatchesMerged applies each committed overlay to its input
// spec, with a small Overlay 1.0.0 applier written here from the
// specification (update: objects merged recursively, arrays appended,
// anything else replaced), and compares the result with the published
// spec.
func TestOverlayMatchesMerged(t *testing.T) {
	byInput := map[string]map[bool]string{}
	for _, c := range specCases(t) {
		in := filepath.Join(c.dir, c.flag("-spec"))
		if byInput[in] == nil {
			byInput[in] = map[bool]string{}
		}
		byInput[in][c.overlay()] = filepath.Join(c.dir, c.flag("-o"))
	}
	for in, outs := range byInput {
		t.Run(filepath.Base(filepath.Dir(in)), func(t *testing.T) {
			if outs[true] == "" || outs[false] == "" {
				t.Fatalf("%s has no overlay and merged pair", in)
			}
			doc := readAny(t, in)
			ov := readAny(t, outs[true]).(map[string]any)
			if ov["overlay"] != "1.0.0" {
				t.Fatalf("overlay version %v", ov["overlay"])
			}
			for _, a := range ov["actions"].([]any) {
				a := a.(map[string]any)
				target := selectPath(t, doc, a["target"].(string))
				overlayMerge(target, a["update"].(map[string]any))
			}
			if want := readAny(t, outs[false]); !reflect.DeepEqual(doc, want) {
				t.Errorf("applying %s to %s does not give %s", outs[true], in, outs[false])
			}
		})
	}
}

func readAny(t *testing.T, file string) any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

var pathStep = regexp.MustCompile(`^(?:\.([A-Za-z_][A-Za-z0-9_]*)|\['((?:[^'\\]|\\.)*)'\])`)

func selectPath(t *testing.T, doc any, path string) map[string]any {
	t.Helper()
	rest, ok := strings.CutPrefix(path, "$")
	if !ok {
		t.Fatalf("target %q does not start with $", path)
	}
	cur := doc
	for rest != "" {
		m := pathStep.FindStringSubmatch(rest)
		if m == nil {
			t.Fatalf("target %q: cannot read %q", path, rest)
		}
		name := m[1]
		if name == "" {
			name = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[2])
		}
		obj, ok := cur.(map[string]any)
		if !ok || obj[name] == nil {
			t.Fatalf("target %q selects nothing at %q", path, name)
		}
		cur, rest = obj[name], rest[len(m[0]):]
	}
	obj, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("target %q is not an object", path)
	}
	return obj
}

func overlayMerge(target, update map[string]any) {
	for k, v := range update {
		switch old := target[k].(type) {
		case map[string]any:
			if vm, ok := v.(map[string]any); ok {
				overlayMerge(old, vm)
				continue
			}
		case []any:
			if vs, ok := v.([]any); ok {
				target[k] = append(old, vs...)
				continue
			}
		}
		target[k] = v
	}
}

func TestSpecCommand(t *testing.T) {
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"spec"}, nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("no -spec: exit %d, want %d", code, exitUsage)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	bad := "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n  /a:\n    post:\n      x-idempotent: {ttl: 1 day}\n      responses: {\"200\": {description: ok}}\n"
	stdout.Reset()
	stderr.Reset()
	if code := run(ctx, []string{"spec", "-spec", "-"}, strings.NewReader(bad), &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), `<stdin>:6:22: x-idempotent.ttl: "1 day" is not a duration`) || stdout.Len() != 0 {
		t.Errorf("a bad annotation: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	good := strings.Replace(bad, "{ttl: 1 day}", "true", 1)
	if err := os.WriteFile("openapi.yaml", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("published.yaml", []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(ctx, []string{"spec", "-spec", "openapi.yaml", "-o", "published.yaml", "-check"}, nil, &stdout, &stderr); code != exitError || stdout.String() != "stale: published.yaml\n" {
		t.Errorf("-check on a stale file: exit %d, stdout %q", code, stdout.String())
	}
	if code := run(ctx, []string{"spec", "-spec", "openapi.yaml", "-o", "published.yaml"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if code := run(ctx, []string{"spec", "-spec", "openapi.yaml", "-o", "published.yaml", "-check"}, nil, &stdout, &stderr); code != exitOK {
		t.Errorf("-check after writing: exit %d", code)
	}
}

// The operations generate -annotate-mutating protects are published with
// their key when spec is given the same value; a bad value is a usage
// error, as for generate.
func TestSpecAnnotateMutating(t *testing.T) {
	unannotated := "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n  /a:\n    post:\n      operationId: createA\n      responses: {\"200\": {description: ok}}\n"
	code, out, errs := runCLI(t, unannotated, "spec", "-spec", "-")
	if code != exitOK || strings.Contains(out, "Idempotency-Key") {
		t.Fatalf("without the flag: exit %d, stderr %q; the key is published:\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, unannotated, "spec", "-spec", "-", "-annotate-mutating", `{"ttl": "2h"}`)
	if code != exitOK || !strings.Contains(out, "name: Idempotency-Key") || !strings.Contains(out, "ttl: 2h") {
		t.Errorf("-annotate-mutating: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if code, _, errs := runCLI(t, unannotated, "spec", "-spec", "-", "-annotate-mutating", `{"ttl": "1 day"}`); code != exitUsage || !strings.Contains(errs, "idemgen spec: -annotate-mutating: ") {
		t.Errorf("a bad -annotate-mutating: exit %d, stderr %q", code, errs)
	}
}
