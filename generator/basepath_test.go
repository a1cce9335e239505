package generator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

const basePathSpec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers:
  - url: https://api.example.com/v1
paths:
  /orders/{id}:
    post:
      operationId: createOrder
      x-idempotent: {principal: anonymous}
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "201": {description: created}
`

// Config.BasePaths (-base-path) replaces the servers' base paths of every
// policy; the root leaves BasePaths out, as a spec served at the root does.
func TestConfigBasePathsOverride(t *testing.T) {
	for _, c := range []struct {
		bases []string
		want  []string
	}{
		{nil, []string{"/v1"}},
		{[]string{"/"}, nil},
		{[]string{""}, nil},
		{[]string{}, nil},
		{[]string{"/api/"}, []string{"/api"}},
		{[]string{"/v2", "/", "/v2/"}, []string{"", "/v2"}},
		{[]string{"/{tenant}"}, []string{"/{tenant}"}},
	} {
		res, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(basePathSpec), Package: "api", SkipStore: true, BasePaths: c.bases})
		if err != nil {
			t.Fatalf("BasePaths %q: %v", c.bases, err)
		}
		if got := res.Model.Operations[0].BasePaths; !slices.Equal(got, c.want) {
			t.Errorf("BasePaths %q: policy base paths %q, want %q", c.bases, got, c.want)
		}
		src := string(res.Files[PoliciesFile])
		if c.want == nil && strings.Contains(src, "BasePaths:") {
			t.Errorf("BasePaths %q: the root is emitted:\n%s", c.bases, src)
		}
	}
	for _, bad := range [][]string{{"v1"}, {"/a{"}} {
		_, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(basePathSpec), Package: "api", SkipStore: true, BasePaths: bad})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("BasePaths %q: err %v, want ErrConfig", bad, err)
		}
	}
	// A base path parameter named like a path parameter: the runtime would
	// refuse to start, so generation refuses, naming the operation.
	_, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(basePathSpec), Package: "api", SkipStore: true, BasePaths: []string{"/{id}"}})
	if err == nil || !strings.Contains(err.Error(), "createOrder") || !strings.Contains(err.Error(), "{id}") {
		t.Errorf("base path /{id}: err %v", err)
	}
}
