package generator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// writeSpec writes files (name -> text) into a new folder and returns it.
func writeSpec(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRemoteRefs: a $ref to an http(s) URL is not fetched unless
// AllowRemoteRefs is set; with it, the fetched document's annotations
// are generated and its mistakes located at its URL.
func TestRemoteRefs(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/paths.yaml":
			w.Write([]byte("post:\n  operationId: pay\n  x-idempotent: {ttl: 2h}\n  responses: {\"200\": {description: ok}}\n"))
		case "/bad.yaml":
			w.Write([]byte("post:\n  operationId: pay\n  x-idempotent: {ttl: 1 day}\n  responses: {\"200\": {description: ok}}\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	spec := func(file string) []byte {
		return []byte("openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n  /pay:\n    $ref: '" + srv.URL + "/" + file + "'\n")
	}
	cfg := Config{Spec: "openapi.yaml", SpecData: spec("paths.yaml"), Package: "api", SkipStore: true}

	_, err := Generate(context.Background(), cfg)
	var ds Diagnostics
	if !errors.As(err, &ds) || len(ds) != 1 || ds[0].Pos.Line != 5 || !strings.Contains(ds[0].Msg, "-allow-remote-refs") {
		t.Fatalf("without AllowRemoteRefs: got %v, want one diagnostic at line 5 naming -allow-remote-refs", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was asked %d times without AllowRemoteRefs", n)
	}

	cfg.AllowRemoteRefs = true
	res, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Model.Operations) != 1 || res.Model.Operations[0].TTL.String() != "2h0m0s" {
		t.Errorf("operations %+v, want pay with ttl 2h", res.Model.Operations)
	}

	cfg.SpecData = spec("bad.yaml")
	_, err = Generate(context.Background(), cfg)
	want := srv.URL + "/bad.yaml:3:18: x-idempotent.ttl"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %s...", err, want)
	}

	cfg.SpecData = spec("missing.yaml")
	_, err = Generate(context.Background(), cfg)
	if !errors.As(err, &ds) || ds[0].Pos.Line != 5 || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing remote document: got %v, want a diagnostic at its $ref", err)
	}
}

// TestLocalRefs: files are read relative to the file that names them,
// only under the spec's folder, and a missing one is reported at its $ref.
func TestLocalRefs(t *testing.T) {
	dir := writeSpec(t, map[string]string{
		"api/openapi.yaml":  "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n  /a:\n    $ref: paths/a.yaml\n",
		"api/paths/a.yaml":  "post:\n  operationId: a\n  x-idempotent: {key: {fields: [id]}}\n  requestBody: {$ref: '../bodies/a.yaml'}\n  responses: {\"200\": {description: ok}}\n",
		"api/bodies/a.yaml": "content:\n  application/json:\n    schema: {type: object, properties: {id: {type: string}}}\n",
		"secret.yaml":       "content: {}\n",
	})
	spec := filepath.Join(dir, "api", "openapi.yaml")
	res, err := Generate(context.Background(), Config{Spec: spec, Package: "api", SkipStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if ops := res.Model.Operations; len(ops) != 1 || ops[0].KeyFields[0] != "id" {
		t.Errorf("operations %+v", ops)
	}

	if err := os.Symlink(filepath.Join(dir, "secret.yaml"), filepath.Join(dir, "api", "bodies", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		"../../secret.yaml":   "outside the spec's folder",
		"../bodies/link.yaml": "outside the spec's folder",
		"../bodies/b.yaml":    "no such file",
	} {
		paths := filepath.Join(dir, "api", "paths", "a.yaml")
		text := "post:\n  operationId: a\n  x-idempotent: true\n  requestBody: {$ref: '" + body + "'}\n  responses: {\"200\": {description: ok}}\n"
		if err := os.WriteFile(paths, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Generate(context.Background(), Config{Spec: spec, Package: "api", SkipStore: true})
		var ds Diagnostics
		if !errors.As(err, &ds) || len(ds) != 1 || ds[0].Pos != (Pos{File: paths, Line: 4, Col: 23}) || !strings.Contains(ds[0].Msg, want) {
			t.Errorf("$ref %s: got %v, want %s at %s:4:23", body, err, want, paths)
		}
	}
}
