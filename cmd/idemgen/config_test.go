package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func files(t *testing.T, dir string) string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

const twoOutputs = `version: 1
spec: api/openapi.yaml
outputs:
  - out: internal/idem
    package: idem
    store: false
  - out: internal/idemlite
    dialect: sqlite
    table: request_keys
`

func TestConfigGenerate(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "api/openapi.yaml", spec)
	writeFile(t, configFile, twoOutputs)

	if code, _, errs := runCLI(t, "", "generate"); code != 0 {
		t.Fatalf("generate: exit %d, stderr %s", code, errs)
	}
	if got := files(t, "internal/idem"); got != "idemgen_policies.go" {
		t.Errorf("internal/idem: %s", got)
	}
	lite := files(t, "internal/idemlite")
	if !strings.Contains(lite, "idemgen_store.go") {
		t.Errorf("internal/idemlite: %s", lite)
	}
	schema, _ := os.ReadFile("internal/idemlite/idemgen_schema.sql")
	if !strings.Contains(string(schema), "request_keys") {
		t.Errorf("table: from the file was not used:\n%s", schema)
	}
	policies, _ := os.ReadFile("internal/idemlite/idemgen_policies.go")
	if !strings.Contains(string(policies), "package idemlite\n") {
		t.Errorf("package did not default to the out folder's name")
	}
	if code, out, errs := runCLI(t, "", "generate", "-check"); code != 0 {
		t.Fatalf("-check after generate: exit %d, %s %s", code, out, errs)
	}

	// A flag overrides the file in every output: -table makes the store stale.
	code, out, _ := runCLI(t, "", "generate", "-check", "-table", "other_keys")
	if code != 1 || !strings.Contains(out, "stale: "+filepath.Join("internal", "idemlite", "idemgen_schema.sql")) || !strings.Contains(out, "+CREATE TABLE IF NOT EXISTS other_keys") {
		t.Errorf("-check -table other_keys: exit %d, stdout:\n%s", code, out)
	}
	if code, _, errs := runCLI(t, "", "generate", "-store=false"); code != 0 {
		t.Fatalf("generate -store=false: exit %d, %s", code, errs)
	}
	if got := files(t, "internal/idemlite"); got != "idemgen_policies.go" {
		t.Errorf("-store=false did not override store: %s", got)
	}

	// -out would write both outputs to one folder.
	if code, _, errs := runCLI(t, "", "generate", "-out", "x"); code != 2 || !strings.Contains(errs, "2 outputs") {
		t.Errorf("-out with two outputs: exit %d, stderr %q", code, errs)
	}
	// An explicit -spec means no file, even an empty one.
	if code, _, errs := runCLI(t, "", "generate", "-spec="); code != 2 || !strings.Contains(errs, "missing -spec") {
		t.Errorf("-spec=: exit %d, stderr %q", code, errs)
	}
}

func TestConfigLintAndRoutes(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "api/openapi.yaml", spec+`  /orders/{id}:
    delete:
      operationId: deleteOrder
      responses: {"204": {description: ok}}
`)
	writeFile(t, configFile, twoOutputs)
	if code, out, errs := runCLI(t, "", "lint"); code != 1 || !strings.Contains(out, "deleteOrder") {
		t.Errorf("lint: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCLI(t, "", "routes"); code != 0 || !strings.Contains(out, "createOrder") {
		t.Errorf("routes: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	// Without a file, nothing changes.
	if code, _, errs := runCLI(t, "", "generate"); code != 2 || !strings.Contains(errs, "missing -spec") {
		t.Errorf("no file: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "lint"); code != 2 || !strings.Contains(errs, "want -spec") {
		t.Errorf("lint, no file: exit %d, stderr %q", code, errs)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"unknown field", "version: 1\nspec: a.yaml\noutputs:\n  - out: x\n    dialekt: sqlite\n", `line 5: field dialekt not found`},
		{"version", "version: 2\nspec: a.yaml\noutputs: [{out: x}]\n", "version 2, want version: 1"},
		{"no spec", "version: 1\noutputs: [{out: x}]\n", "no spec:"},
		{"no out", "version: 1\nspec: a.yaml\noutputs: [{dialect: sqlite}]\n", "outputs[0]: no out:"},
		{"annotate", "version: 1\nspec: a.yaml\noutputs: [{out: x, annotate-mutating: 3}]\n", "annotate-mutating: want true or an object"},
		{"empty", "", "empty"},
		{"no outputs", "version: 1\nspec: a.yaml\n", "lists no outputs"},
	} {
		writeFile(t, configFile, tc.text)
		code, _, errs := runCLI(t, "", "generate")
		if code != 2 || !strings.Contains(errs, configFile) || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", tc.name, code, errs, tc.want)
		}
	}
}

func TestConfigAnnotateMutating(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "openapi.yaml", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      responses: {"200": {description: ok}}
`)
	writeFile(t, configFile, "version: 1\nspec: openapi.yaml\noutputs:\n  - out: idem\n    store: false\n    annotate-mutating: {principal: anonymous, ttl: 2h}\n")
	if code, _, errs := runCLI(t, "", "generate"); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	src, _ := os.ReadFile("idem/idemgen_policies.go")
	if !strings.Contains(string(src), "createOrder") || !strings.Contains(string(src), "2 * time.Hour") {
		t.Errorf("annotate-mutating was not applied:\n%s", src)
	}
}

// Every flag of generate can come from the file: base-path (one or a
// list, per output) and allow-remote-refs (at the top, for lint and
// routes too). A flag on the command line replaces the file's value,
// even a repeatable one.
func TestConfigBasePathAndRemoteRefs(t *testing.T) {
	t.Chdir(t.TempDir())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "post:\n  operationId: createOrder\n  x-idempotent: true\n  responses: {\"200\": {description: ok}}\n")
	}))
	defer srv.Close()
	writeFile(t, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\nservers: [{url: https://api.example.com/v1}]\npaths:\n  /orders: {$ref: '"+srv.URL+"/orders.yaml'}\n")
	writeFile(t, configFile, `version: 1
spec: openapi.yaml
allow-remote-refs: true
outputs:
  - {out: one, store: false, base-path: /}
  - {out: two, store: false, base-path: [/v2, /]}
`)
	// basePaths is the policy's BasePaths value, "none" when it has none
	// (the root alone).
	basePaths := func(dir string) string {
		src, err := os.ReadFile(filepath.Join(dir, "idemgen_policies.go"))
		if err != nil {
			return err.Error()
		}
		_, after, ok := strings.Cut(string(src), "BasePaths:")
		if !ok {
			return "none"
		}
		line, _, _ := strings.Cut(after, "\n")
		return strings.TrimSpace(line)
	}
	if code, _, errs := runCLI(t, "", "generate"); code != 0 {
		t.Fatalf("generate: exit %d, stderr %s", code, errs)
	}
	if got, want := basePaths("one"), "none"; got != want {
		t.Errorf("one: BasePaths %s, want %s", got, want)
	}
	if got, want := basePaths("two"), `[]string{"", "/v2"},`; got != want {
		t.Errorf("two: BasePaths %s, want %s", got, want)
	}
	if code, _, errs := runCLI(t, "", "generate", "-base-path", "/v3"); code != 0 {
		t.Fatalf("generate -base-path /v3: exit %d, stderr %s", code, errs)
	}
	for _, dir := range []string{"one", "two"} {
		if got, want := basePaths(dir), `[]string{"/v3"},`; got != want {
			t.Errorf("-base-path /v3: %s: BasePaths %s, want %s", dir, got, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string // in stdout and stderr
	}{
		{[]string{"lint"}, ""},
		{[]string{"routes", "-base-path", "/"}, "createOrder"},
		// Every command that loads the spec takes the flag its error names.
		{[]string{"routes", "-spec", "openapi.yaml", "-allow-remote-refs"}, "createOrder"},
		{[]string{"spec", "-spec", "openapi.yaml", "-allow-remote-refs"}, "createOrder): not published: it is not in this file"},
	} {
		code, out, errs := runCLI(t, "", tc.args...)
		if code != 0 || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
		}
	}
	if code, _, errs := runCLI(t, "", "routes"); code != 2 || !strings.Contains(errs, "different base-path values; pass -base-path") {
		t.Errorf("routes, outputs with different base paths: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "routes", "-spec", "openapi.yaml"); code != 1 || !strings.Contains(errs, "-allow-remote-refs") {
		t.Errorf("routes without -allow-remote-refs: exit %d, stderr %q", code, errs)
	}
}

// routes shows the operations as generate protects them: under the
// base-path the outputs of idemgen.yaml share, and with those their
// annotate-mutating annotates; flags replace the file's values.
func TestConfigRoutes(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\nservers: [{url: https://api.example.com/v1}]\npaths:\n  /orders:\n    post:\n      operationId: createOrder\n      responses: {\"200\": {description: ok}}\n")
	writeFile(t, configFile, `version: 1
spec: openapi.yaml
outputs:
  - {out: a, store: false, base-path: /api, annotate-mutating: {ttl: 2h}}
  - {out: b, store: false, base-path: [/api], annotate-mutating: {ttl: 2h}}
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"routes"}, "createOrder  POST    /api/orders  header Idempotency-Key  anonymous  2h"},
		{[]string{"routes", "-base-path", "/v2"}, "POST    /v2/orders"},
		{[]string{"routes", "-annotate-mutating", "true"}, "/api/orders  header Idempotency-Key  anonymous  24h"},
	} {
		code, out, errs := runCLI(t, "", tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, stdout (want %q):\n%s", tc.args, code, errs, tc.want, out)
		}
	}
}

// spec, like routes, reads idemgen.yaml without -spec: its spec, and the
// annotate-mutating its outputs share (the flag replaces it).
func TestConfigSpec(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n  /orders:\n    post:\n      operationId: createOrder\n      responses: {\"200\": {description: ok}}\n")
	writeFile(t, configFile, `version: 1
spec: openapi.yaml
outputs:
  - {out: a, store: false, annotate-mutating: {ttl: 2h}}
  - {out: b, store: false, annotate-mutating: {ttl: 2h}}
`)
	code, out, errs := runCLI(t, "", "spec")
	if code != exitOK || !strings.Contains(out, "name: Idempotency-Key") || !strings.Contains(out, "ttl: 2h") {
		t.Errorf("spec: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, "", "spec", "-annotate-mutating", `{"ttl": "3h"}`)
	if code != exitOK || !strings.Contains(out, "ttl: 3h") {
		t.Errorf("spec -annotate-mutating: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	writeFile(t, configFile, "version: 1\nspec: openapi.yaml\noutputs:\n  - {out: a, store: false, annotate-mutating: {ttl: 2h}}\n  - {out: b, store: false}\n")
	if code, _, errs := runCLI(t, "", "spec"); code != exitUsage || !strings.Contains(errs, "different annotate-mutating values") {
		t.Errorf("spec, outputs with different annotate-mutating: exit %d, stderr %q", code, errs)
	}
}
