package generator

import (
	"context"
	"errors"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Diagnostics are values: a policy the runtime refuses carries the
// runtime's *idemrt.FieldError as its cause (errors.As finds it through
// Diagnostics), and a warning has its severity, its message no prefix.
func TestDiagnosticsSeverityAndCause(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {fingerprint: {exclude: [""]}, key: {header: X-Key}}
      requestBody:
        content:
          application/json:
            schema: {type: object}
      responses:
        "201": {description: created}
`
	_, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(spec), Package: "api", SkipStore: true})
	var fe *idemrt.FieldError
	if !errors.As(err, &fe) || fe.Section != "fingerprint" || fe.Field != "FingerprintExclude" {
		t.Fatalf("got %v (field error %+v), want the runtime's FingerprintExclude error as a cause", err, fe)
	}
	var ds Diagnostics
	if !errors.As(err, &ds) || len(ds.Errors()) != 1 || len(ds) != 2 {
		t.Fatalf("got %v, want one error and one warning", err)
	}
	for _, d := range ds {
		if d.Severity == SeverityWarning && (d.Msg[:len("x-idempotent.key.header")] != "x-idempotent.key.header" || d.String() != d.Pos.String()+": warning: "+d.Msg) {
			t.Errorf("warning %q: its message or printed form is wrong", d.String())
		}
	}
}
