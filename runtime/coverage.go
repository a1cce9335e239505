package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
)

// CoverageOptions configures CheckCoverage.
type CoverageOptions struct {
	// BasePaths, when non-nil, replaces every policy's base paths, as
	// Options.BasePaths does: give it what you give the middleware.
	BasePaths []string
	// Prepare, when set, is called on each probe before it is sent, with
	// the policy it probes: add what the stack in front of the middleware
	// needs to let a request through, such as an Authorization header or a
	// session cookie. It must leave the idempotency key and the body alone.
	Prepare func(p *Policy, r *http.Request)
	// PathValue, when set, returns the sample value of a path parameter
	// (of the route or of a base path) for the probes; the default is "1".
	// Give one your router accepts if it routes on a parameter's syntax.
	PathValue func(p *Policy, param string) string
}

// CoverageError reports one probe that the idempotency middleware did not
// refuse: the operation it names is not proven protected at that path.
type CoverageError struct {
	OperationID string
	Method      string
	// Path is the probe's path: the route under one base path, with every
	// path parameter filled in.
	Path string
	// Status is the probe's response status (0 when the handler panicked)
	// and Body the first bytes of its body.
	Status int
	Body   string
	// Hint says what the answer suggests is wrong.
	Hint string
}

func (e *CoverageError) Error() string {
	return fmt.Sprintf("idempotency: operation %s, %s %s: answered %d %q, not the idempotency middleware's refusal: %s",
		e.OperationID, e.Method, e.Path, e.Status, e.Body, e.Hint)
}

// probeKey is a key the middleware refuses as malformed (256 characters).
var probeKey = strings.Repeat("k", MaxKeyLength+1)

// refusals are the problem types a probe may get: the middleware's answers
// before it claims anything. Any of them proves that the middleware served
// the probe's route.
var refusals = map[string]bool{
	ProblemKeyMalformed:    true,
	ProblemKeyMissing:      true,
	ProblemUnauthenticated: true,
	ProblemRequestTooLarge: true,
	ProblemBodyUnreadable:  true,
}

// CheckCoverage proves that h, the whole handler stack a server runs
// (router, middleware and handlers, as main builds it), sends every
// operation of policies through the idempotency middleware. It sends one
// probe per operation and base path: the policy's method and route, path
// parameters filled with a sample value, carrying what the middleware
// refuses before any handler runs, so that nothing is claimed or stored: a
// malformed key (256 characters) for header and query keys, the JSON body
// {} (which lacks the key's fields) for required fields keys, and a body
// one byte over max-request-bytes (by its Content-Length) for body keys
// and optional fields keys.
// The refusal is recognised by its problem type (ProblemBase), not by its
// status. A middleware in front of the router refuses those probes whether
// or not the router serves their paths, so each refused probe is followed
// by a request with a method no policy protects (IDEMGEN-PROBE), which the
// middleware passes through: the router must answer it 405 (it serves the
// path for other methods), not 404.
//
// It returns nil when every probe was refused by the middleware, else one
// *CoverageError per probe that was not (joined with errors.Join), each
// with its status, the first bytes of its body and a hint: a 404 when the
// router serves the path without the policy's base path, a 401 from
// authentication in front of the middleware (let probes through with
// Prepare: an operation whose probe was stopped is reported, never
// passed), a handler's answer when the route is registered outside the
// middleware. A probe that is not refused reaches the handler: run the
// check against a test stack (a test store, fake dependencies).
//
// Policies without a route of their own (generated webhooks and
// callbacks, whose Route is only a label) must not be passed: check them
// with a copy whose Route is where they are mounted.
func CheckCoverage(h http.Handler, policies []*Policy, opts CoverageOptions) error {
	if h == nil {
		return errors.New("idempotency: CheckCoverage: nil handler")
	}
	if err := checkBasePaths("CoverageOptions.BasePaths", opts.BasePaths); err != nil {
		return err
	}
	// The policies are compiled as the middleware compiles them, so that
	// the probes follow its defaults and routes; the engine never runs.
	e := &engine{store: noStore{}, txStore: noStore{}, principal: func(*http.Request) (string, error) { return "", errNoStore }}
	var errs []error
	for _, p := range policies {
		op, err := e.compile(withBasePaths(p, opts.BasePaths))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rp := range op.patterns {
			if err := probe(h, p, op, rp, opts); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// probe sends the probes of op at rp and reports the first that fails.
func probe(h http.Handler, p *Policy, op *operation, rp *routePattern, opts CoverageOptions) error {
	path := rp.fill(func(name string) string {
		if opts.PathValue != nil {
			if v := opts.PathValue(p, name); v != "" {
				return v
			}
		}
		return "1"
	})
	base := strings.TrimSuffix(rp.template, op.route)
	r, err := probeRequest(op.method, path)
	if err != nil {
		return fmt.Errorf("idempotency: operation %s: building the probe of %s %s: %w", op.name, op.method, path, err)
	}
	switch op.key {
	case KeyFromHeader:
		r.Header.Set(op.keyName, probeKey)
	case KeyFromQuery:
		r.URL.RawQuery = url.QueryEscape(op.keyName) + "=" + probeKey
		r.RequestURI = r.URL.RequestURI()
	case KeyFromFields:
		if !op.optional {
			// A JSON body without the key's fields: 400 key-missing. It is
			// small, so a check in front that reads the body (a webhook's
			// signature) can be satisfied by Prepare.
			r.Body = io.NopCloser(strings.NewReader("{}"))
			r.ContentLength = 2
			r.Header.Set("Content-Type", "application/json")
			break
		}
		fallthrough
	default:
		if op.maxReq == math.MaxInt64 {
			return fmt.Errorf("idempotency: operation %s: no probe: max-request-bytes is unbounded", op.name)
		}
		r.ContentLength = op.maxReq + 1
		r.Body = io.NopCloser(io.LimitReader(probeBody{}, r.ContentLength))
		r.Header.Set("Content-Type", "application/json")
	}
	rec, panicked := send(h, p, r, opts)
	if panicked || !refused(rec) {
		ce := coverageError(op, path, rec, panicked)
		ce.Hint = coverageHint(ce.Status, base, rec, panicked)
		return ce
	}
	// A middleware in front of the router refuses the probe whether the
	// router serves the path or not. A request with a method no policy
	// protects passes through it: a router that serves the path answers
	// 405 (or 501), one that does not answers 404.
	r, _ = probeRequest(probeMethod, path)
	rec, panicked = send(h, p, r, opts)
	switch {
	case panicked || rec.Code == http.StatusNotFound:
		ce := coverageError(op, path, rec, panicked)
		// A router may answer 404 to every method it does not route, so
		// the hint names both readings; either way nothing is proven.
		ce.Hint = "the middleware protects this path, but the router does not serve it (a request with method " + probeMethod + " got " + strconv.Itoa(ce.Status) + ", not 405), " +
			"or answers 404 to methods it does not route (gin without HandleMethodNotAllowed, an echo group's middleware: see docs/frameworks.md): "
		if base != "" {
			ce.Hint += "does your router serve it without the base path " + base + "? see Options.BasePaths / -base-path"
		} else {
			ce.Hint += "does your router serve it under a base path (oapi-codegen's BaseURL, ogen's WithPathPrefix)? see Options.BasePaths / -base-path"
		}
		return ce
	case rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden:
		ce := coverageError(op, path, rec, false)
		ce.Hint = "the middleware protects this path, but whether the router serves it is unproven: a request with method " + probeMethod + " was stopped, likely by authentication; add credentials to the probes with CoverageOptions.Prepare"
		return ce
	}
	return nil
}

// probeMethod is the method of the probe that asks the router whether it
// serves a path: one that no policy protects and no handler serves.
const probeMethod = "IDEMGEN-PROBE"

func probeRequest(method, path string) (*http.Request, error) {
	r, err := http.NewRequestWithContext(context.Background(), method, "http://example.com"+path, nil)
	if err != nil {
		return nil, err
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "192.0.2.1:1234"
	r.Body = http.NoBody // as a server's request has
	return r, nil
}

// send prepares r and serves it.
func send(h http.Handler, p *Policy, r *http.Request, opts CoverageOptions) (*httptest.ResponseRecorder, bool) {
	if opts.Prepare != nil {
		opts.Prepare(p, r)
	}
	rec := httptest.NewRecorder()
	return rec, serveProbe(h, rec, r)
}

func coverageError(op *operation, path string, rec *httptest.ResponseRecorder, panicked bool) *CoverageError {
	ce := &CoverageError{OperationID: op.name, Method: op.method, Path: path, Status: rec.Code, Body: firstBytes(rec.Body.Bytes())}
	if panicked {
		ce.Status = 0
	}
	return ce
}

// serveProbe serves r and reports whether the stack panicked.
func serveProbe(h http.Handler, w http.ResponseWriter, r *http.Request) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
		}
	}()
	h.ServeHTTP(w, r)
	return false
}

// refused reports whether rec is one of the middleware's refusals.
func refused(rec *httptest.ResponseRecorder) bool {
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/problem+json") {
		return false
	}
	var pb Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &pb); err != nil {
		return false
	}
	return refusals[pb.Type] && pb.Status == rec.Code
}

// coverageHint says what a probe's answer suggests; base is the base path
// it was sent under ("" for the root).
func coverageHint(status int, base string, rec *httptest.ResponseRecorder, panicked bool) string {
	var pb Problem
	ours := strings.HasPrefix(rec.Header().Get("Content-Type"), "application/problem+json") &&
		json.Unmarshal(rec.Body.Bytes(), &pb) == nil && strings.HasPrefix(pb.Type, ProblemBase)
	switch {
	case panicked:
		return "the stack panicked: the probe reached a handler that the middleware does not protect"
	case ours:
		return "the middleware answered " + pb.Type + ", which a probe should not reach; is another policy on this route?"
	case status == http.StatusNotFound && base != "":
		return "does your router serve this path without the base path " + base + "? see Options.BasePaths / -base-path"
	case status == http.StatusNotFound:
		return "the router does not serve this path: is it mounted under a prefix? see Options.BasePaths / -base-path"
	case status == http.StatusMethodNotAllowed:
		return "the router does not serve this method at this path"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "stopped before the middleware, likely by authentication in front of it: unproven; add credentials to the probes with CoverageOptions.Prepare"
	case status == http.StatusRequestEntityTooLarge:
		return "a body limit in front of the middleware refused the probe's body (max-request-bytes + 1): unproven"
	}
	return "the probe reached a handler without the idempotency middleware: is the route registered outside the middleware (mw wraps another mux than the one serving it)?"
}

// firstBytes returns up to 96 bytes of a body.
func firstBytes(b []byte) string {
	const n = 96
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// fill renders the pattern as a request path, each parameter replaced by
// value(name) and every segment escaped.
func (rp *routePattern) fill(value func(name string) string) string {
	var sb strings.Builder
	for _, seg := range rp.segs {
		sb.WriteByte('/')
		for _, part := range seg.Parts {
			if part.Param {
				sb.WriteString(url.PathEscape(value(part.Text)))
			} else {
				sb.WriteString(url.PathEscape(part.Text))
			}
		}
	}
	return sb.String()
}

// probeBody is an endless body of spaces: not a JSON document, for a
// handler that reads it unprotected.
type probeBody struct{}

func (probeBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

var errNoStore = errors.New("idempotency: CheckCoverage does not use a store")

// noStore lets CheckCoverage compile policies; probes never reach it.
type noStore struct{}

func (noStore) Claim(context.Context, ClaimRequest) (ClaimResult, error) {
	return ClaimResult{}, errNoStore
}
func (noStore) Complete(context.Context, Completion) error      { return errNoStore }
func (noStore) Release(context.Context, RecordKey, int64) error { return errNoStore }
func (noStore) Sweep(context.Context, int) (int, error)         { return 0, errNoStore }
func (noStore) BeginTx(context.Context) (Tx, error)             { return nil, errNoStore }
