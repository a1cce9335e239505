package generator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/testutil"
)

// TestPublishRealSpecs publishes every spec of the corpus with every
// mutating operation annotated (-annotate-mutating's way): the published
// spec loads, validates with kin-openapi whenever the spec itself does,
// and carries x-idempotent on exactly the operations the model holds.
func TestPublishRealSpecs(t *testing.T) {
	dir := testutil.SpecsDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") || name == danglingRef {
			continue
		}
		if info, err := e.Info(); err == nil && raceEnabled && info.Size() > 1<<20 {
			continue // see TestRealSpecs
		}
		n++
		t.Run(name, func(t *testing.T) {
			cfg := Config{Spec: filepath.Join(dir, name), AnnotateMutating: map[string]any{"principal": "anonymous"}}
			pub, err := Publish(ctx, cfg, PublishOptions{JSON: strings.HasSuffix(name, ".json")})
			if err != nil {
				t.Fatal(err)
			}
			loader := openapi3.NewLoader()
			doc, err := loader.LoadFromData(pub.Data)
			if err != nil {
				t.Fatalf("the published spec does not load: %v", err)
			}
			orig, err := openapi3.NewLoader().LoadFromFile(cfg.Spec)
			if err == nil && orig.Validate(ctx) == nil {
				if err := doc.Validate(ctx); err != nil {
					t.Errorf("the spec validates, the published one does not: %v", err)
				}
			}
			got := 0
			for _, item := range doc.Paths.Map() {
				for _, op := range item.Operations() {
					if _, ok := op.Extensions["x-idempotent"].(map[string]any); ok {
						got++
					}
				}
			}
			if want, known := mutatingOps[name]; known && len(pub.Model.Operations) != want {
				t.Errorf("%d operations annotated, want %d", len(pub.Model.Operations), want)
			}
			want := 0
			for _, o := range pub.Model.Operations {
				if o.Kind == InPaths {
					want++
				}
			}
			if got != want {
				t.Errorf("%d operations under paths carry the published x-idempotent, want %d", got, want)
			}
		})
	}
	if n == 0 {
		t.Fatal("no spec in the corpus")
	}
}
