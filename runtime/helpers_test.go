package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// policy returns an anonymous header-key policy for POST /orders/{id}.
func policy(mod ...func(*idemrt.Policy)) *idemrt.Policy {
	p := &idemrt.Policy{
		OperationID: "createOrder",
		Method:      http.MethodPost,
		Route:       "/orders/{id}",
		Key:         idemrt.KeyFromHeader,
		KeyName:     "Idempotency-Key",
		Principal:   idemrt.PrincipalAnonymous,
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

// counting is a handler that counts its runs and answers 201 with a JSON
// body and a mix of replayable and private headers.
type counting struct {
	calls atomic.Int64
	fn    func(w http.ResponseWriter, r *http.Request) // optional override
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	if c.fn != nil {
		c.fn(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", "/orders/42")
	h.Set("Etag", `"v1"`)
	h.Add("Link", `</a>; rel="next"`)
	h.Add("Link", `</b>; rel="prev"`)
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Private", "not replayed")
	h.Set("X-Request-Count", "declared")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"run": n, "echo": string(body)})
}

func wrap(t testing.TB, opts idemrt.Options, p *idemrt.Policy, h http.Handler) http.Handler {
	t.Helper()
	if opts.Store == nil {
		opts.Store = idemrt.NewMemoryStore()
	}
	w, err := idemrt.Wrap(opts, p, h)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	return w
}

type req struct {
	method, path, key, body, ctype string
	header                         http.Header
}

func do(h http.Handler, rq req) *httptest.ResponseRecorder {
	if rq.method == "" {
		rq.method = http.MethodPost
	}
	if rq.path == "" {
		rq.path = "/orders/1"
	}
	r := httptest.NewRequest(rq.method, rq.path, strings.NewReader(rq.body))
	if rq.ctype == "" {
		rq.ctype = "application/json"
	}
	r.Header.Set("Content-Type", rq.ctype)
	if rq.key != "" {
		r.Header.Set("Idempotency-Key", rq.key)
	}
	for k, vs := range rq.header {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// wantProblem checks an RFC 9457 response.
func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) problemBody {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	var p problemBody
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Errorf("problem = %+v, want type %s status %d with title and detail", p, typ, status)
	}
	if w.Header().Get("Idempotent-Replayed") != "" {
		t.Error("a problem response carries Idempotent-Replayed")
	}
	return p
}

// faultStore wraps a Store with injectable failures.
type faultStore struct {
	idemrt.Store
	mu          sync.Mutex
	claimErr    error
	completeErr error
	releaseErr  error
	claims      []idemrt.ClaimRequest
	completes   []idemrt.Completion
	releases    int
}

func (f *faultStore) Claim(ctx context.Context, r idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	f.mu.Lock()
	f.claims = append(f.claims, r)
	err := f.claimErr
	f.mu.Unlock()
	if err != nil {
		return idemrt.ClaimResult{}, err
	}
	return f.Store.Claim(ctx, r)
}

func (f *faultStore) Complete(ctx context.Context, c idemrt.Completion) error {
	f.mu.Lock()
	f.completes = append(f.completes, c)
	err := f.completeErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.Complete(ctx, c)
}

func (f *faultStore) Release(ctx context.Context, k idemrt.RecordKey, epoch int64) error {
	f.mu.Lock()
	f.releases++
	err := f.releaseErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.Release(ctx, k, epoch)
}

var errDown = errors.New("database is down")
