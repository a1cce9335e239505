package runtime_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// coveragePolicies are one operation per key source, under /v1, one of
// them per caller.
func coveragePolicies() []*idemrt.Policy {
	v1 := func(p *idemrt.Policy) { p.BasePaths = []string{"/v1"} }
	return []*idemrt.Policy{
		policy(v1),
		policy(v1, func(p *idemrt.Policy) {
			p.OperationID, p.Route, p.Key, p.KeyName, p.Optional = "addNote", "/orders/{id}/notes", idemrt.KeyFromQuery, "key", true
		}),
		policy(v1, func(p *idemrt.Policy) {
			p.OperationID, p.Route, p.Key, p.KeyName, p.KeyFields = "refund", "/orders/{id}/refunds", idemrt.KeyFromFields, "", []string{"refund.id"}
			p.Optional = true // a refund without the fields would run unprotected: the probe must not rely on them
		}),
		policy(v1, func(p *idemrt.Policy) {
			p.OperationID, p.Method, p.Route, p.Key, p.KeyName = "putItem", http.MethodPut, "/items/{sku}.{ext}", idemrt.KeyFromBody, ""
			p.MaxRequestBytes = 1 << 10
		}),
		policy(v1, func(p *idemrt.Policy) {
			p.OperationID, p.Route, p.Principal = "charge", "/charges", idemrt.PrincipalAuth
		}),
	}
}

// coverageMux registers a counting handler for every route of
// coveragePolicies under prefix.
func coverageMux(prefix string, c *counting) *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range []string{"POST /orders/{id}", "POST /orders/{id}/notes", "POST /orders/{id}/refunds", "PUT /items/{file}", "POST /charges"} {
		m, path, _ := strings.Cut(p, " ")
		mux.Handle(m+" "+prefix+path, c)
	}
	return mux
}

func coverageMiddleware(t *testing.T, store idemrt.Store, opts idemrt.Options) func(http.Handler) http.Handler {
	t.Helper()
	opts.Store = store
	opts.Principal = func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-User"); u != "" {
			return u, nil
		}
		return "", errors.New("anonymous")
	}
	mw, err := idemrt.NewMiddleware(opts, coveragePolicies()...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// coverageErrors unpacks CheckCoverage's joined errors.
func coverageErrors(t *testing.T, err error) []*idemrt.CoverageError {
	t.Helper()
	var out []*idemrt.CoverageError
	if err == nil {
		return nil
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *idemrt.CoverageError
		if !errors.As(e, &ce) {
			t.Fatalf("not a *CoverageError: %v", e)
		}
		out = append(out, ce)
	}
	return out
}

func TestCheckCoverageCoveredStack(t *testing.T) {
	c := &counting{}
	store := &faultStore{Store: idemrt.NewMemoryStore()}
	h := coverageMiddleware(t, store, idemrt.Options{})(coverageMux("/v1", c))
	if err := idemrt.CheckCoverage(h, coveragePolicies(), idemrt.CoverageOptions{}); err != nil {
		t.Fatalf("covered stack: %v", err)
	}
	// With the caller identified, the auth operation is refused for its key.
	prepare := func(p *idemrt.Policy, r *http.Request) { r.Header.Set("X-User", "alice") }
	if err := idemrt.CheckCoverage(h, coveragePolicies(), idemrt.CoverageOptions{Prepare: prepare}); err != nil {
		t.Fatalf("covered stack, probes with a caller: %v", err)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("the probes ran handlers %d times, want 0", n)
	}
	if len(store.claims) != 0 || len(store.completes) != 0 || store.releases != 0 {
		t.Errorf("the probes reached the store: %d claims, %d completions, %d releases", len(store.claims), len(store.completes), store.releases)
	}
}

// The router serves the spec's paths at the root (oapi-codegen's
// HandlerFromMux, ogen without WithPathPrefix) while the policies say /v1.
// In front of the router, the middleware refuses the probes under /v1
// whatever the router serves: the router's 404 to the IDEMGEN-PROBE
// method tells, and every operation is reported without a handler run.
func TestCheckCoverageRouterWithoutBasePath(t *testing.T) {
	c := &counting{}
	h := coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{})(coverageMux("", c))
	err := idemrt.CheckCoverage(h, coveragePolicies(), idemrt.CoverageOptions{})
	ces := coverageErrors(t, err)
	if len(ces) != len(coveragePolicies()) {
		t.Fatalf("%d operations reported, want %d: %v", len(ces), len(coveragePolicies()), err)
	}
	want := map[string]string{
		"createOrder": "POST /v1/orders/1", "addNote": "POST /v1/orders/1/notes", "refund": "POST /v1/orders/1/refunds",
		"putItem": "PUT /v1/items/1.1", "charge": "POST /v1/charges",
	}
	for _, ce := range ces {
		if got := ce.Method + " " + ce.Path; got != want[ce.OperationID] {
			t.Errorf("%s probed %s, want %s", ce.OperationID, got, want[ce.OperationID])
		}
		if ce.Status != http.StatusNotFound || !strings.Contains(ce.Hint, "without the base path /v1?") || !strings.Contains(ce.Hint, "Options.BasePaths") {
			t.Errorf("%s: %v", ce.OperationID, ce)
		}
		// A router that answers 404 to methods it does not route (gin's
		// default) gives the same answer: the hint names that reading too.
		if !strings.Contains(ce.Hint, "HandleMethodNotAllowed") {
			t.Errorf("%s: the hint does not name a router that answers 404 to unrouted methods: %v", ce.OperationID, ce)
		}
		if !strings.Contains(ce.Error(), ce.OperationID) || !strings.Contains(ce.Error(), ce.Path) || !strings.Contains(ce.Error(), "404") {
			t.Errorf("the message does not name the operation, path and status: %v", ce)
		}
	}
	// Options.BasePaths moves the middleware to the root; CoverageOptions
	// gets the same value and proves it.
	h = coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{BasePaths: []string{"/"}})(coverageMux("", c))
	if err := idemrt.CheckCoverage(h, coveragePolicies(), idemrt.CoverageOptions{BasePaths: []string{"/"}}); err != nil {
		t.Errorf("middleware and coverage at the root: %v", err)
	}
	// The reverse: the middleware at the root, the router under /v1.
	h = coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{BasePaths: []string{"/"}})(coverageMux("/v1", c))
	ces = coverageErrors(t, idemrt.CheckCoverage(h, coveragePolicies(), idemrt.CoverageOptions{BasePaths: []string{"/"}}))
	if len(ces) != len(coveragePolicies()) || ces[0].Path != "/orders/1" || !strings.Contains(ces[0].Hint, "under a base path") {
		t.Errorf("middleware at the root, router under /v1: %v", ces)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("the probes ran handlers %d times, want 0", n)
	}
}

// The middleware behind the router (per route, as oapi-codegen's
// StdHTTPServerOptions.Middlewares run it): the router answers the probe
// 404 under the base path it does not serve.
func TestCheckCoverageMiddlewareBehindRouter(t *testing.T) {
	c := &counting{}
	mw := coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{})
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", mw(c))
	err := idemrt.CheckCoverage(mux, coveragePolicies()[:1], idemrt.CoverageOptions{})
	ces := coverageErrors(t, err)
	if len(ces) != 1 {
		t.Fatalf("reported %v, want the 404 under /v1", err)
	}
	if ce := ces[0]; ce.Path != "/v1/orders/1" || ce.Status != http.StatusNotFound || !strings.Contains(ce.Hint, "does your router serve this path without the base path /v1?") {
		t.Errorf("under /v1: %v", ce)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
}

// A route registered beside the middleware instead of behind it.
func TestCheckCoverageRouteOutsideMiddleware(t *testing.T) {
	inner, outside := &counting{}, &counting{}
	mw := coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{})
	outer := http.NewServeMux()
	outer.Handle("/", mw(coverageMux("/v1", inner)))
	outer.Handle("POST /v1/charges", outside) // wired wrong: not behind mw
	panicky := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	outer.Handle("PUT /v1/items/{file}", panicky)
	ces := coverageErrors(t, idemrt.CheckCoverage(outer, coveragePolicies(), idemrt.CoverageOptions{}))
	if len(ces) != 2 {
		t.Fatalf("reported %v, want charge and putItem", ces)
	}
	for _, ce := range ces {
		switch ce.OperationID {
		case "charge":
			if ce.Status != http.StatusCreated || !strings.Contains(ce.Hint, "outside the middleware") || !strings.Contains(ce.Body, `"run":1`) {
				t.Errorf("charge: %v", ce)
			}
		case "putItem":
			if ce.Status != 0 || !strings.Contains(ce.Hint, "panicked") {
				t.Errorf("putItem: %v", ce)
			}
		default:
			t.Errorf("reported %v", ce)
		}
	}
	if n := inner.calls.Load(); n != 0 {
		t.Errorf("protected handlers ran %d times, want 0", n)
	}
}

// Authentication in front of the middleware stops the probes: reported as
// unproven, until Prepare lets them through.
func TestCheckCoverageAuthInFront(t *testing.T) {
	c := &counting{}
	protected := coverageMiddleware(t, idemrt.NewMemoryStore(), idemrt.Options{})(coverageMux("/v1", c))
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		protected.ServeHTTP(w, r)
	})
	ces := coverageErrors(t, idemrt.CheckCoverage(auth, coveragePolicies(), idemrt.CoverageOptions{}))
	if len(ces) != len(coveragePolicies()) {
		t.Fatalf("%d reported, want every operation", len(ces))
	}
	for _, ce := range ces {
		if ce.Status != http.StatusUnauthorized || !strings.Contains(ce.Hint, "Prepare") || ce.Body != "unauthorized\n" {
			t.Errorf("%v", ce)
		}
	}
	var seen []string
	prepare := func(p *idemrt.Policy, r *http.Request) {
		seen = append(seen, p.OperationID)
		r.Header.Set("Authorization", "Bearer test")
	}
	if err := idemrt.CheckCoverage(auth, coveragePolicies(), idemrt.CoverageOptions{Prepare: prepare}); err != nil {
		t.Errorf("with credentials: %v", err)
	}
	if len(seen) != 2*len(coveragePolicies()) || seen[0] != "createOrder" || seen[9] != "charge" {
		t.Errorf("Prepare saw %q, want each operation twice (the probe, then the router's)", seen)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("handlers ran %d times", n)
	}
}

// Every base path is probed, with parameters of base paths filled too, and
// PathValue chooses the sample.
func TestCheckCoverageEveryBasePath(t *testing.T) {
	p := policy(func(p *idemrt.Policy) { p.BasePaths = []string{"/v1", "/t/{tenant}"} })
	c := &counting{}
	w, err := idemrt.Wrap(idemrt.Options{Store: idemrt.NewMemoryStore()}, p, c)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/orders/{id}", w) // /t/{tenant} is not served
	value := func(_ *idemrt.Policy, name string) string { return name + " x" }
	ces := coverageErrors(t, idemrt.CheckCoverage(mux, []*idemrt.Policy{p}, idemrt.CoverageOptions{PathValue: value}))
	if len(ces) != 1 || ces[0].Path != "/t/tenant%20x/orders/id%20x" || ces[0].Status != http.StatusNotFound {
		t.Fatalf("got %v, want one 404 at /t/tenant%%20x/orders/id%%20x", ces)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
	// Bad input is an error, not a panic.
	if err := idemrt.CheckCoverage(nil, []*idemrt.Policy{p}, idemrt.CoverageOptions{}); err == nil {
		t.Error("nil handler accepted")
	}
	if err := idemrt.CheckCoverage(mux, []*idemrt.Policy{nil, policy(func(p *idemrt.Policy) { p.Route = "x" })}, idemrt.CoverageOptions{}); err == nil {
		t.Error("bad policies accepted")
	}
	if err := idemrt.CheckCoverage(mux, []*idemrt.Policy{p}, idemrt.CoverageOptions{BasePaths: []string{"v1"}}); err == nil || !strings.Contains(err.Error(), "CoverageOptions.BasePaths") {
		t.Errorf("bad base path: %v", err)
	}
}
