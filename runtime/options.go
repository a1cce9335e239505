// Package runtime is the idempotency engine that idemgen's generated
// wrappers call: key parsing, request fingerprints (RFC 8785 canonical
// JSON), the claim state machine with leases, epochs and fencing, response
// capture and replay, and RFC 9457 problem responses. It imports only the
// standard library. Generated code imports it as idemrt, because its name
// collides with the standard library's runtime package.
//
// The behaviour is specified in docs/contract.md.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Options configures the middleware.
type Options struct {
	// Store keeps the idempotency records. Required. Operations with
	// Policy.Transactional need a TxStore.
	Store Store
	// Principal returns the authenticated caller of a request, for
	// operations with PrincipalAuth. An error or an empty string answers
	// 401 (problem type unauthenticated) and the handler does not run.
	// It is hashed with HashPrincipal; the clear value is never stored.
	Principal func(*http.Request) (string, error)
	// Hooks are called on notable events (replays, conflicts, store
	// errors...) so that users can count them.
	Hooks Hooks
	// Logger receives debug logs (replays, conflicts) and info/warn logs
	// (takeovers, fenced completions, store errors). Nil logs nothing.
	Logger *slog.Logger
}

// Event describes one notable event of one request.
type Event struct {
	OperationID string
	Scope       string
	Key         string
	// Epoch is the record's epoch where one is known.
	Epoch int64
	// Status is the status of the response involved (the replayed status,
	// the saved status...), when there is one.
	Status int
	// Err is the error of StoreError and Fenced events.
	Err error
}

// Hooks are optional callbacks, one per kind of event. Nil fields are
// skipped. They run synchronously on the request's goroutine: keep them
// quick (increment a counter).
type Hooks struct {
	// Claimed: this request claimed a key that was absent or expired (a
	// first request); the handler runs next. A takeover calls TakenOver
	// instead.
	Claimed func(context.Context, Event)
	// Replayed: a saved response was replayed.
	Replayed func(context.Context, Event)
	// Conflict: the key was in progress (409), after any wait.
	Conflict func(context.Context, Event)
	// Mismatch: the key was reused with another fingerprint (422).
	Mismatch func(context.Context, Event)
	// Unavailable: the key's result was too large to save (409 on a
	// tombstone).
	Unavailable func(context.Context, Event)
	// StoreError: the store failed (claim -> 503; save -> the response is
	// still sent and the record stays in progress until its lease ends).
	StoreError func(context.Context, Event)
	// TakenOver: this request took over a record whose lease had ended.
	TakenOver func(context.Context, Event)
	// Fenced: this request's completion or release was refused because
	// another attempt had taken the record over.
	Fenced func(context.Context, Event)
	// Completed: a result (or a tombstone) was saved.
	Completed func(context.Context, Event)
	// Released: the key was released (response outside save, panic,
	// transaction failure).
	Released func(context.Context, Event)
}

type txKey struct{}

// TxFromContext returns the transaction that transactional mode opened for
// the request (Policy.Transactional). Handlers do their writes through
// tx.Handle(); generated stores offer a typed accessor on top.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
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
	var errs []error
	byMethod := map[string][]*matcher{}
	seen := map[string]string{}
	for _, p := range policies {
		op, err := e.compile(p)
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
			byMethod[op.method] = append(byMethod[op.method], &matcher{op: op, route: rp})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, ms := range byMethod {
		slices.SortStableFunc(ms, func(a, b *matcher) int { return compareSpecificity(a.route, b.route) })
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.NotFoundHandler()
		}
		return &middleware{e: e, byMethod: byMethod, next: next}
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
	op, err := e.compile(p)
	if err != nil {
		return nil, err
	}
	return &wrapped{e: e, op: op, next: h}, nil
}

type matcher struct {
	op    *operation
	route *routePattern
}

type middleware struct {
	e        *engine
	byMethod map[string][]*matcher
	next     http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ms := m.byMethod[r.Method]
	if len(ms) == 0 {
		m.next.ServeHTTP(w, r)
		return
	}
	path := r.URL.EscapedPath()
	var buf [8]string
	for _, mt := range ms {
		if params, ok := mt.route.match(path, buf[:0]); ok {
			m.e.serve(w, r, mt.op, m.next, params)
			return
		}
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
	path := r.URL.EscapedPath()
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
			params = append(buf[:0], "path:"+path)
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
	e := &engine{store: opts.Store, principal: opts.Principal, hooks: opts.Hooks, log: opts.Logger}
	e.txStore, _ = opts.Store.(TxStore)
	return e, nil
}

// opName names an operation in errors and logs.
func opName(p *Policy) string {
	if p.OperationID != "" {
		return p.OperationID
	}
	return strings.TrimSpace(p.Method + " " + p.Route)
}
