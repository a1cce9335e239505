package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	idemrt "github.com/idemgen/idemgen/runtime"
)

const probeSpec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: /api}]
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {key: {body: true}}
      requestBody:
        content:
          application/json:
            schema: {type: object}
      responses: {'201': {description: ok}}
  /carts/{id}:
    put:
      operationId: putCart
      x-idempotent: {key: {query: op_key}}
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: op_key, in: query, schema: {type: string}}
      responses: {'200': {description: ok}}
`

// The probes cross the network for body and query keys too, and a stack
// with the middleware on a path the router does not serve is reported.
func TestProbeBodyAndQueryKeys(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	if err := os.WriteFile(spec, []byte(probeSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := generator.Generate(context.Background(), generator.Config{Spec: spec, Package: "p", SkipStore: true})
	if err != nil {
		t.Fatal(err)
	}
	var policies []*idemrt.Policy
	for _, op := range res.Model.Operations {
		policies = append(policies, policyOf(op))
	}
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }
	mux.HandleFunc("POST /api/orders", ok)
	mux.HandleFunc("PUT /api/carts/{id}", ok)
	srv := httptest.NewServer(mw(mux))
	defer srv.Close()
	probe := func(base string) (int, string) {
		var out bytes.Buffer
		code := run(context.Background(), []string{"probe", "-spec", spec, "-base", base, "-timeout", "20s"}, nil, &out, &out)
		return code, out.String()
	}
	if code, out := probe(srv.URL); code != 0 || strings.Count(out, "PROTECTED") != 2 {
		t.Fatalf("protected stack: exit %d\n%s", code, out)
	}
	// The router without the base path: the middleware refuses the probe,
	// the router answers 404 to the follow-up.
	bare := http.NewServeMux()
	bare.HandleFunc("POST /orders", ok)
	bare.HandleFunc("PUT /carts/{id}", ok)
	srv2 := httptest.NewServer(mw(bare))
	defer srv2.Close()
	if code, out := probe(srv2.URL); code != 1 || strings.Count(out, "does not serve it") != 2 {
		t.Fatalf("router without the base path: exit %d\n%s", code, out)
	}
	// A gateway that strips the key: the probe is refused (key-missing),
	// but no key ever reaches the middleware.
	strip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Idempotency-Key")
		q := r.URL.Query()
		q.Del("op_key")
		r.URL.RawQuery = q.Encode()
		mw(mux).ServeHTTP(w, r)
	}))
	defer strip.Close()
	code, out := probe(strip.URL)
	if code != 1 || !strings.Contains(out, "query parameter stripped") || !strings.Contains(out, "createOrder") {
		t.Fatalf("a gateway that strips the key: exit %d\n%s", code, out)
	}
}
