package generator

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// policyOf is the policy the emitter writes for o (a copy).
func policyOf(o *Operation) *idemrt.Policy {
	p := o.Policy
	return &p
}

// startMiddleware checks that the runtime accepts every routed policy of m
// at start-up (routes parse, no two operations claim the same requests,
// values are valid), and every webhook and callback policy in Wrap.
func startMiddleware(t *testing.T, name string, m *Model) {
	t.Helper()
	opts := idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: func(*http.Request) (string, error) { return "p", nil }}
	var routed []*idemrt.Policy
	for _, o := range m.Operations {
		p := policyOf(o)
		if o.Routed() {
			routed = append(routed, p)
			continue
		}
		if _, err := idemrt.Wrap(opts, p, http.NotFoundHandler()); err != nil {
			t.Errorf("%s: %s: the runtime refuses the policy: %v", name, o.GoName, err)
		}
	}
	if _, err := idemrt.NewMiddleware(opts, routed...); err != nil {
		t.Errorf("%s: the runtime refuses the policies: %v", name, err)
	}
}

func TestModelMirrorsRuntimeConstants(t *testing.T) {
	if idemrt.KeySource(KeyHeader) != idemrt.KeyFromHeader || idemrt.KeySource(KeyQuery) != idemrt.KeyFromQuery ||
		idemrt.KeySource(KeyFields) != idemrt.KeyFromFields || idemrt.KeySource(KeyBody) != idemrt.KeyFromBody {
		t.Error("KeySource values differ from the runtime's")
	}
	if idemrt.PrincipalMode(PrincipalAuth) != idemrt.PrincipalAuth || idemrt.PrincipalMode(PrincipalAnonymous) != idemrt.PrincipalAnonymous {
		t.Error("Principal values differ from the runtime's")
	}
	if idemrt.StatusClass(Class5xx) != idemrt.Class5xx || idemrt.StatusClass(DefaultSaveClasses) != idemrt.DefaultSave.Classes {
		t.Error("status classes differ from the runtime's")
	}
	if DefaultTTL != idemrt.DefaultTTL || DefaultLease != idemrt.DefaultLease ||
		DefaultMaxResponseBytes != idemrt.DefaultMaxResponseBytes || DefaultMaxRequestBytes != idemrt.DefaultMaxRequestBytes {
		t.Error("defaults differ from the runtime's")
	}
}

// A server variable without an enum that stands for a whole segment is a
// parameter of the base path: any value is protected, and the runtime
// accepts the policies (two servers with such a variable are one pattern).
func TestServerVariableSegmentThroughRuntime(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
servers:
  - url: https://api.x/{tenant}
    variables: {tenant: {default: acme}}
  - url: https://eu.api.x/{region}
    variables: {region: {default: eu}}
  - url: https://api.x/fixed/{id}
    variables: {id: {default: v1}}
paths:
  /orders/{id}:
    post:
      operationId: createOrder
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      x-idempotent: {principal: anonymous}
      responses: {"200": {description: ok}}
`
	res, err := gen(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Model.Operations[0]
	if want := []string{"/fixed/v1", "/{region}"}; !slices.Equal(o.BasePaths, want) {
		t.Fatalf("BasePaths %q, want %q", o.BasePaths, want)
	}
	startMiddleware(t, "spec", res.Model)
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, policyOf(o))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n++ }))
	for i, c := range []struct {
		path     string
		replayed bool
	}{{"/globex/orders/1", false}, {"/globex/orders/1", true}, {"/fixed/v1/orders/2", false}, {"/fixed/v1/orders/2", true}} {
		req := httptest.NewRequest("POST", c.path, nil)
		req.Header.Set("Idempotency-Key", "k"+c.path)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Idempotent-Replayed") == "true"; rec.Code != http.StatusOK || got != c.replayed {
			t.Errorf("%d %s: status %d replayed %v, want 200 replayed %v", i, c.path, rec.Code, got, c.replayed)
		}
	}
	if n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}
