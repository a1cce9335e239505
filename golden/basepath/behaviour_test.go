package basepath

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update // every test package registers -update

func bearer(r *http.Request) (string, error) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		return tok, nil
	}
	return "", errors.New("no bearer token")
}

// rootRouter serves the spec's paths at the root, as oapi-codegen's
// HandlerFromMux(si, mux) and ogen's NewServer (without WithPathPrefix) do.
func rootRouter() (*http.ServeMux, *behave.Counter) {
	c := &behave.Counter{Status: http.StatusCreated}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", c)
	mux.Handle("POST /orders/{orderId}/refunds", c)
	mux.Handle("POST /orders/{orderId}/notes", c)
	return mux, c
}

// -base-path / generated policies that match the root, where the router
// serves the operations, although the spec's servers say /v1.
func TestGeneratedForTheRoot(t *testing.T) {
	for _, p := range Policies() {
		if len(p.BasePaths) != 0 {
			t.Errorf("%s: BasePaths %q, want none (the root)", p.OperationID, p.BasePaths)
		}
	}
	mux, c := rootRouter()
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: bearer})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(mux)
	alice := map[string]string{"Authorization": "Bearer alice", "Idempotency-Key": "k-1"}
	behave.Want(t, "first", behave.Do(t, h, "POST", "/orders", alice, `{"n":1}`), http.StatusCreated, false)
	behave.Want(t, "retry", behave.Do(t, h, "POST", "/orders", alice, `{"n":1}`), http.StatusCreated, true)
	refund := `{"refund":{"id":"r-1"}}`
	behave.Want(t, "refund", behave.Do(t, h, "POST", "/orders/7/refunds", alice, refund), http.StatusCreated, false)
	behave.Want(t, "refund again", behave.Do(t, h, "POST", "/orders/7/refunds", alice, refund), http.StatusCreated, true)
	if n := c.N.Load(); n != 2 {
		t.Errorf("handlers ran %d times, want 2", n)
	}
}

// Options.BasePaths moves the same policies at start-up, without
// regenerating: here under /api, where a router mounted with a prefix
// (oapi-codegen's BaseURL, ogen's WithPathPrefix) serves them.
func TestOptionsBasePathsMoveThem(t *testing.T) {
	c := &behave.Counter{Status: http.StatusCreated}
	mux := http.NewServeMux()
	mux.Handle("POST /api/orders", c)
	mux.Handle("POST /orders", c)
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: bearer, BasePaths: []string{"/api"}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(mux)
	alice := map[string]string{"Authorization": "Bearer alice", "Idempotency-Key": "k-1"}
	behave.Want(t, "first", behave.Do(t, h, "POST", "/api/orders", alice, `{}`), http.StatusCreated, false)
	behave.Want(t, "retry", behave.Do(t, h, "POST", "/api/orders", alice, `{}`), http.StatusCreated, true)
	behave.Want(t, "the root is no longer protected", behave.Do(t, h, "POST", "/orders", nil, `{}`), http.StatusCreated, false)
}

// The generated CheckCoverage proves the wiring: nil for the router at the
// root, and every routed operation (not the callback) reported when the
// router is mounted under /v1 instead, as oapi-codegen's BaseURL or ogen's
// WithPathPrefix would mount it. No probe runs a handler.
func TestCheckCoverage(t *testing.T) {
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: bearer})
	if err != nil {
		t.Fatal(err)
	}
	mux, c := rootRouter()
	if err := CheckCoverage(mw(mux), idemrt.CoverageOptions{}); err != nil {
		t.Errorf("router at the root: %v", err)
	}

	under := http.NewServeMux()
	under.Handle("/v1/", http.StripPrefix("/v1", mux))
	err = CheckCoverage(mw(under), idemrt.CoverageOptions{})
	var ces []*idemrt.CoverageError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *idemrt.CoverageError
		if errors.As(e, &ce) {
			ces = append(ces, ce)
		}
	}
	got := map[string]string{}
	for _, ce := range ces {
		got[ce.OperationID] = ce.Method + " " + ce.Path
		if ce.Status != http.StatusNotFound || !strings.Contains(ce.Hint, "-base-path") {
			t.Errorf("%v", ce)
		}
	}
	want := map[string]string{"addNote": "POST /orders/1/notes", "createOrder": "POST /orders", "refundOrder": "POST /orders/1/refunds"}
	if len(got) != len(want) || len(ces) != len(want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s reported at %q, want %q", id, got[id], w)
		}
	}
	if n := c.N.Load(); n != 0 {
		t.Errorf("the probes ran handlers %d times", n)
	}
}
