package generator_test

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/idemgen/idemgen/generator"
)

func ExampleGenerate() {
	spec := []byte(`openapi: 3.0.3
info: {title: Payments, version: "1"}
paths:
  /charges:
    post:
      operationId: createCharge
      x-idempotent: {ttl: 48h}
      responses: {"201": {description: created}}
`)
	res, err := generator.Generate(context.Background(), generator.Config{
		Spec: "openapi.yaml", SpecData: spec, Package: "idem", Dialect: "sqlite",
	})
	if err != nil {
		fmt.Println(err) // a generator.Diagnostics: one "file:line:col: message" per line
		return
	}
	for _, name := range slices.Sorted(maps.Keys(res.Files)) {
		fmt.Println(name)
	}
	op := res.Model.Operations[0]
	fmt.Println(op.GoName, op.Method, op.Path, op.TTL)
	// Output:
	// idemgen_db.go
	// idemgen_outbox.go
	// idemgen_policies.go
	// idemgen_queries.sql
	// idemgen_queries.sql.go
	// idemgen_schema.sql
	// idemgen_sqlc.yaml
	// idemgen_store.go
	// idemgen_sweep.go
	// CreateCharge POST /charges 48h0m0s
}

func ExampleDiagnostics() {
	spec := []byte(`openapi: 3.0.3
info: {title: Payments, version: "1"}
paths:
  /charges:
    post:
      x-idempotent: {ttl: 1 day, key: {header: X-Key, query: key}}
      responses: {"201": {description: created}}
`)
	_, err := generator.Generate(context.Background(), generator.Config{
		Spec: "openapi.yaml", SpecData: spec, Package: "idem", SkipStore: true,
	})
	fmt.Println(err)
	// Output:
	// openapi.yaml:6:22: x-idempotent.ttl: "1 day" is not a duration (want e.g. 24h)
	// openapi.yaml:6:34: x-idempotent.key: two key sources (header and query); want exactly one
}
