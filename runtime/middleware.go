package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

type txKey struct{}

// TxFromContext returns the transaction that transactional mode opened for
// the request (Policy.Transactional). Handlers do their writes through
// tx.Handle(); generated stores offer a typed accessor on top.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
}

// ForeignTxError is what a generated store's typed TxFromContext panics
// with when the request has a transaction whose handle is not its
// driver's: the middleware's Options.Store is another store (the SQLite
// output serving a handler written for the PostgreSQL one, or a
// MemoryStore, whose transactions have no handle). Returning "no
// transaction" instead would let the handler write outside the
// transaction that commits its idempotency record, without a word.
type ForeignTxError struct {
	// Store names the store whose TxFromContext was called ("PostgreSQL").
	Store string
	// Want is the handle type it reads (pgx.Tx, *sql.Tx).
	Want string
	// Handle is the handle the request's transaction has (nil for a
	// MemoryStore's).
	Handle any
}

func (e *ForeignTxError) Error() string {
	got := "no driver handle (a MemoryStore's transaction)"
	if e.Handle != nil {
		got = fmt.Sprintf("a %T", e.Handle)
	}
	return fmt.Sprintf("idempotency: the %s store's TxFromContext was called in a request whose transaction has %s, not a %s: "+
		"the middleware's Options.Store is another store than the one this handler was written for, and its writes would run outside the transaction; "+
		"serve the handler with the %s store (test it against %s too)", e.Store, got, e.Want, e.Store, e.Store)
}

// NewMiddleware returns a middleware that protects the operations of
// policies: a request whose method and path match one of them goes through
// the idempotency engine; every other request goes to the next handler
// untouched. It works as a wrapper of an http.ServeMux and with routers
// that take func(http.Handler) http.Handler.
//
// Every policy is checked here, at start-up: a nil Store, a PrincipalAuth
// policy without Options.Principal, a Transactional policy on a store that
// is not a TxStore, two policies on the same method and route, and bad
// policy values are errors naming the operation.
func NewMiddleware(opts Options, policies ...*Policy) (func(http.Handler) http.Handler, error) {
	e, err := newEngine(opts)
	if err != nil {
		return nil, err
	}
	routes, err := newRouteTable(policies, func(p *Policy) (*operation, error) {
		return e.compileBounded(p, opts.BasePaths)
	})
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.NotFoundHandler()
		}
		return &middleware{e: e, routes: routes, next: next}
	}, nil
}

// Wrap protects one handler with one policy. Path parameters are matched
// from p.Route (under p.BasePaths); when the request path does not match
// the route (the handler is mounted under a prefix that was stripped), the
// parameters are read with r.PathValue, and failing that the escaped path
// counts in the fingerprint instead. A request whose method is not
// p.Method goes to h unprotected.
func Wrap(opts Options, p *Policy, h http.Handler) (http.Handler, error) {
	e, err := newEngine(opts)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("idempotency: Wrap: nil handler")
	}
	op, err := e.compileBounded(p, opts.BasePaths)
	if err != nil {
		return nil, err
	}
	return &wrapped{e: e, op: op, next: h}, nil
}

type matcher struct {
	op    *operation
	route *routePattern
	// policy is the policy op was compiled from (ClientMatcher).
	policy *Policy
}

// routeTable holds the routes of compiled operations by method, the more
// specific first (NewMiddleware, NewClientMatcher).
type routeTable map[string][]*matcher

// newRouteTable compiles policies with compile and indexes their routes.
// Two policies on the same method and route are an error.
func newRouteTable(policies []*Policy, compile func(*Policy) (*operation, error)) (routeTable, error) {
	t := routeTable{}
	seen := map[string]string{}
	var errs []error
	for _, p := range policies {
		op, err := compile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rp := range op.patterns {
			id := op.method + " " + rp.shape
			if prev, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("idempotency: operations %s and %s both claim %s %s", prev, op.name, op.method, rp.template))
				continue
			}
			seen[id] = op.name
			t[op.method] = append(t[op.method], &matcher{op: op, route: rp, policy: p})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, ms := range t {
		slices.SortStableFunc(ms, func(a, b *matcher) int { return compareSpecificity(a.route, b.route) })
	}
	return t, nil
}

// match returns the matcher of a request's method and escaped path, and
// the path parameters appended to buf; nil when no route matches.
func (t routeTable) match(method, path string, buf []string) (*matcher, []string) {
	return matchRoutes(t[method], path, buf)
}

// matchRoutes is the first of mts (a method's matchers) that matches path,
// and its path parameters, appended to buf.
func matchRoutes(mts []*matcher, path string, buf []string) (*matcher, []string) {
	for _, mt := range mts {
		if params, ok := mt.route.match(path, buf); ok {
			return mt, params
		}
	}
	return nil, nil
}

// matchPath is the path that routes are matched against: u's escaped
// path, whose segments routePattern.match unescapes. A path that was sent
// without escapes (no RawPath) and holds no '%' is its own escaped form as
// far as matching goes (every segment unescapes back to itself), so it is
// used as it is, without escaping it first.
func matchPath(u *url.URL) string {
	if u.RawPath == "" && strings.IndexByte(u.Path, '%') < 0 {
		return u.Path
	}
	return u.EscapedPath()
}

type middleware struct {
	e      *engine
	routes routeTable
	next   http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mts := m.routes[r.Method]
	if len(mts) == 0 {
		m.next.ServeHTTP(w, r)
		return
	}
	var buf [8]string
	if mt, params := matchRoutes(mts, matchPath(r.URL), buf[:0]); mt != nil {
		m.e.serve(w, r, mt.op, m.next, params)
		return
	}
	m.next.ServeHTTP(w, r)
}

type wrapped struct {
	e    *engine
	op   *operation
	next http.Handler
}

func (h *wrapped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != h.op.method {
		h.next.ServeHTTP(w, r)
		return
	}
	path := matchPath(r.URL)
	var buf [8]string
	for _, rp := range h.op.patterns {
		if params, ok := rp.match(path, buf[:0]); ok {
			h.e.serve(w, r, h.op, h.next, params)
			return
		}
	}
	// Mounted elsewhere: ServeMux path values, else the path itself.
	params := buf[:0]
	for _, name := range h.op.paramNames {
		v := r.PathValue(name)
		if v == "" {
			params = append(buf[:0], "path:"+r.URL.EscapedPath())
			break
		}
		params = append(params, v)
	}
	h.e.serve(w, r, h.op, h.next, params)
}

func newEngine(opts Options) (*engine, error) {
	if opts.Store == nil {
		return nil, errors.New("idempotency: Options.Store is nil")
	}
	if err := checkBasePaths("Options.BasePaths", opts.BasePaths); err != nil {
		return nil, err
	}
	e := &engine{store: opts.Store, principal: opts.Principal, hooks: opts.Hooks, log: opts.Logger, logRawKeys: opts.LogRawKeys, storeTimeout: opts.StoreTimeout}
	e.txStore, _ = opts.Store.(TxStore)
	e.claimTx, _ = opts.Store.(ClaimTxStore)
	_, e.inProcess = opts.Store.(*MemoryStore)
	e.storeID = storeIdentity(opts.Store)
	e.ring, e.replayPlaintext = opts.Encryption, opts.ReplayPlaintext
	return e, nil
}

// compileBounded compiles p under the base paths override and checks that
// the store bound is shorter than its lease.
func (e *engine) compileBounded(p *Policy, basePaths []string) (*operation, error) {
	op, err := e.compile(withBasePaths(p, basePaths))
	if err != nil {
		return nil, err
	}
	if e.storeTimeout > 0 && e.storeTimeout >= op.lease {
		return nil, fmt.Errorf("idempotency: operation %s: Options.StoreTimeout %v is not shorter than the lease %v: a claim answered after its lease ended could run beside another attempt; shorten StoreTimeout or lengthen the lease", op.name, e.storeTimeout, op.lease)
	}
	return op, nil
}

// withBasePaths returns p with its BasePaths replaced by override when
// override is non-nil (Options.BasePaths, CoverageOptions.BasePaths).
func withBasePaths(p *Policy, override []string) *Policy {
	if p == nil || override == nil {
		return p
	}
	c := *p
	c.BasePaths = make([]string, 0, len(override))
	for _, b := range override {
		c.BasePaths = append(c.BasePaths, strings.TrimSuffix(b, "/"))
	}
	return &c
}

// checkBasePaths checks an override of the policies' base paths.
func checkBasePaths(what string, bases []string) error {
	var errs []error
	for _, b := range bases {
		if b != "" && !strings.HasPrefix(b, "/") {
			errs = append(errs, fmt.Errorf("idempotency: %s: base path %q does not start with / (the root is \"/\")", what, b))
			continue
		}
		if _, err := parseRoute(b); b != "" && err != nil {
			errs = append(errs, fmt.Errorf("idempotency: %s: %v", what, err))
		}
	}
	return errors.Join(errs...)
}

// opName names an operation in errors and logs.
func opName(p *Policy) string {
	if p.OperationID != "" {
		return p.OperationID
	}
	return strings.TrimSpace(p.Method + " " + p.Route)
}
