package generator

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/testutil"
)

// BenchmarkGenerate generates from real specs with every mutating
// operation annotated (policies and a PostgreSQL store). The load
// sub-benchmarks measure kin-openapi's loading alone, without and with
// origins (Generate records origins only when it has a problem to report).
//
//	go test ./generator -run '^$' -bench Generate -benchmem -count 5
func BenchmarkGenerate(b *testing.B) {
	for _, name := range []string{"stripe-api-2023-08-16.yaml", "square-connect-2025-04-16.json"} {
		path := filepath.Join(testutil.SpecsDir(b), name)
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			cfg := Config{Spec: name, SpecData: data, Package: "api", Dialect: "postgres",
				AnnotateMutating: map[string]any{"principal": "anonymous"}}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				res, err := Generate(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Model.Operations) < 150 {
					b.Fatalf("%d operations", len(res.Model.Operations))
				}
			}
		})
		for _, origins := range []bool{false, true} {
			sub := "load"
			if origins {
				sub = "load-with-origins"
			}
			b.Run(name+"/"+sub, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					l := openapi3.NewLoader()
					l.IncludeOrigin = origins
					if _, err := l.LoadFromData(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
