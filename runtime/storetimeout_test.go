package runtime_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// stallStore is a MemoryStore whose chosen calls stop answering: they
// block until their context is done, as a store whose connection is open
// but silent does, and then fail with the context's error.
type stallStore struct {
	*idemrt.MemoryStore
	claim, complete, release, begin, txComplete, commit atomic.Bool

	mu        sync.Mutex
	deadlines []bool // whether each Claim's context had a deadline
	lastBound time.Duration
}

func stall(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *stallStore) Claim(ctx context.Context, r idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	dl, ok := ctx.Deadline()
	s.mu.Lock()
	s.deadlines = append(s.deadlines, ok)
	if ok {
		s.lastBound = time.Until(dl)
	}
	s.mu.Unlock()
	if s.claim.Load() {
		return idemrt.ClaimResult{}, stall(ctx)
	}
	return s.MemoryStore.Claim(ctx, r)
}

func (s *stallStore) Complete(ctx context.Context, c idemrt.Completion) error {
	if s.complete.Load() {
		return stall(ctx)
	}
	return s.MemoryStore.Complete(ctx, c)
}

func (s *stallStore) Release(ctx context.Context, k idemrt.RecordKey, epoch int64) error {
	if s.release.Load() {
		return stall(ctx)
	}
	return s.MemoryStore.Release(ctx, k, epoch)
}

func (s *stallStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	if s.begin.Load() {
		return nil, stall(ctx)
	}
	tx, err := s.MemoryStore.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	return &stallTx{Tx: tx, s: s}, nil
}

type stallTx struct {
	idemrt.Tx
	s *stallStore
}

func (t *stallTx) Complete(ctx context.Context, c idemrt.Completion) error {
	if t.s.txComplete.Load() {
		return stall(ctx)
	}
	return t.Tx.Complete(ctx, c)
}

func (t *stallTx) Commit(ctx context.Context) error {
	if t.s.commit.Load() {
		_ = t.Tx.Rollback(ctx)
		return stall(ctx)
	}
	return t.Tx.Commit(ctx)
}

func storeErrors(n *atomic.Int64, last *atomic.Value) idemrt.Hooks {
	return idemrt.Hooks{StoreError: func(_ context.Context, e idemrt.Event) {
		n.Add(1)
		last.Store(e.Err)
	}}
}

func want503(t *testing.T, w interface {
	Header() http.Header
}, what string) {
	t.Helper()
	if ra := w.Header().Get("Retry-After"); ra == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
}

// A claim that never answers is cut at StoreTimeout: 503, Retry-After, no
// handler run; once the store answers again, the retry runs exactly once.
func TestStoreTimeoutClaim(t *testing.T) {
	st := &stallStore{MemoryStore: idemrt.NewMemoryStore()}
	var n atomic.Int64
	var last atomic.Value
	next := &counting{}
	h := wrap(t, idemrt.Options{Store: st, StoreTimeout: 20 * time.Millisecond, Hooks: storeErrors(&n, &last)}, policy(), next)

	st.claim.Store(true)
	w := do(h, req{key: "k-1", body: `{"a":1}`})
	wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
	want503(t, w, "stalled claim")
	if next.calls.Load() != 0 {
		t.Fatal("the handler ran without a claim")
	}
	if err, _ := last.Load().(error); n.Load() != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StoreError hook: %d calls, last error %v; want 1 with context.DeadlineExceeded", n.Load(), err)
	}

	st.claim.Store(false)
	if w := do(h, req{key: "k-1", body: `{"a":1}`}); w.Code != http.StatusCreated {
		t.Fatalf("retry after the store came back: %d %s", w.Code, w.Body)
	}
	if w := do(h, req{key: "k-1", body: `{"a":1}`}); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second retry: %d, replayed %q", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if got := next.calls.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
}

// A completion that never answers: the client still gets the handler's
// response, and the record stays in progress until its lease ends.
func TestStoreTimeoutCompletion(t *testing.T) {
	st := &stallStore{MemoryStore: idemrt.NewMemoryStore()}
	var n atomic.Int64
	var last atomic.Value
	next := &counting{}
	h := wrap(t, idemrt.Options{Store: st, StoreTimeout: 20 * time.Millisecond, Hooks: storeErrors(&n, &last)}, policy(), next)
	st.complete.Store(true)
	if w := do(h, req{key: "k-1"}); w.Code != http.StatusCreated {
		t.Fatalf("the handler's response: %d %s", w.Code, w.Body)
	}
	if err, _ := last.Load().(error); n.Load() != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StoreError hook: %d calls, last %v", n.Load(), err)
	}
	st.complete.Store(false)
	wantProblem(t, do(h, req{key: "k-1"}), http.StatusConflict, idemrt.ProblemInProgress)
	if next.calls.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", next.calls.Load())
	}
}

// Transactional mode: a transaction that cannot begin is 503 before the
// handler; a completion or commit that never answers rolls back and is 503,
// and a retry runs once.
func TestStoreTimeoutTransactional(t *testing.T) {
	for _, stage := range []string{"begin", "complete", "commit"} {
		t.Run(stage, func(t *testing.T) {
			st := &stallStore{MemoryStore: idemrt.NewMemoryStore()}
			flag := map[string]*atomic.Bool{"begin": &st.begin, "complete": &st.txComplete, "commit": &st.commit}[stage]
			next := &counting{}
			h := wrap(t, idemrt.Options{Store: st, StoreTimeout: 20 * time.Millisecond}, txPolicy(), next)
			flag.Store(true)
			w := do(h, req{key: "k-1"})
			wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
			want503(t, w, stage)
			wantRuns := int64(1)
			if stage == "begin" {
				wantRuns = 0
			}
			if got := next.calls.Load(); got != wantRuns {
				t.Fatalf("handler ran %d times, want %d", got, wantRuns)
			}
			flag.Store(false)
			if w := do(h, req{key: "k-1"}); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("retry: %d %s", w.Code, w.Body)
			}
			if w := do(h, req{key: "k-1"}); w.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("second retry not replayed: %d", w.Code)
			}
			if got := next.calls.Load(); got != wantRuns+1 {
				t.Errorf("handler ran %d times, want %d", got, wantRuns+1)
			}
		})
	}
}

// The bound: the default is DefaultStoreTimeout, or half a shorter lease;
// negative leaves the request's context alone; a bound not shorter than a
// lease fails at start-up.
func TestStoreTimeoutDefaultsAndStartup(t *testing.T) {
	for _, c := range []struct {
		timeout, lease time.Duration
		max            time.Duration // 0: no deadline
	}{
		{0, 0, idemrt.DefaultStoreTimeout},
		{0, 2 * time.Second, time.Second},
		{time.Second, 0, time.Second},
		{-1, 0, 0},
	} {
		st := &stallStore{MemoryStore: idemrt.NewMemoryStore()}
		p := policy(func(p *idemrt.Policy) { p.Lease = c.lease; p.TTL = time.Hour })
		do(wrap(t, idemrt.Options{Store: st, StoreTimeout: c.timeout}, p, &counting{}), req{key: "k"})
		if got := st.deadlines[0]; got != (c.max > 0) {
			t.Errorf("StoreTimeout %v, lease %v: claim context has a deadline: %v", c.timeout, c.lease, got)
		}
		if c.max > 0 && (st.lastBound > c.max || st.lastBound <= 0) {
			t.Errorf("StoreTimeout %v, lease %v: claim bound %v, want at most %v", c.timeout, c.lease, st.lastBound, c.max)
		}
	}
	opts := idemrt.Options{Store: idemrt.NewMemoryStore(), StoreTimeout: time.Minute}
	if _, err := idemrt.NewMiddleware(opts, policy()); err == nil || !strings.Contains(err.Error(), "createOrder") || !strings.Contains(err.Error(), "lease") {
		t.Errorf("StoreTimeout = lease: %v", err)
	}
	if _, err := idemrt.Wrap(opts, policy(), &counting{}); err == nil {
		t.Error("Wrap accepted StoreTimeout = lease")
	}
	opts.StoreTimeout = 59 * time.Second
	if _, err := idemrt.NewMiddleware(opts, policy()); err != nil {
		t.Errorf("StoreTimeout under the lease: %v", err)
	}
}

// waitStore is a store whose claims never answer: each waits, the way a
// driver does, for its context to end and fails with the context's error.
// how is the driver's way: on Done, on a context.WithCancel child (as
// database/sql does for every query) or through context.AfterFunc (as
// pgx does).
type waitStore struct {
	*idemrt.MemoryStore
	how string
}

func (s *waitStore) Claim(ctx context.Context, _ idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	switch s.how {
	case "WithCancel":
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		<-child.Done()
	case "AfterFunc":
		ended := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { close(ended) })
		defer stop()
		<-ended
	default:
		<-ctx.Done()
	}
	return idemrt.ClaimResult{}, ctx.Err()
}

// A claim that never answers ends at StoreTimeout, and when the client goes
// away (before the call, early in it, or later), however the store waits
// on its context; the request answers 503 and the StoreError hook gets the
// context's error.
func TestStoreTimeoutEndsHungClaim(t *testing.T) {
	const bound = 60 * time.Millisecond
	for _, how := range []string{"Done", "WithCancel", "AfterFunc"} {
		for _, c := range []struct {
			name     string
			timeout  time.Duration
			goneAt   time.Duration // -1: the client stays
			want     error
			earliest time.Duration
		}{
			{"bound", bound, -1, context.DeadlineExceeded, bound},
			{"client gone before", time.Minute / 2, 0, context.Canceled, 0},
			{"client gone early", time.Minute / 2, time.Millisecond, context.Canceled, time.Millisecond},
			{"client gone later", time.Minute / 2, 30 * time.Millisecond, context.Canceled, 30 * time.Millisecond},
		} {
			t.Run(how+"/"+c.name, func(t *testing.T) {
				var n atomic.Int64
				var last atomic.Value
				next := &counting{}
				h := wrap(t, idemrt.Options{Store: &waitStore{MemoryStore: idemrt.NewMemoryStore(), how: how}, StoreTimeout: c.timeout, Hooks: storeErrors(&n, &last)}, policy(), next)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				// start comes before the client's departure is armed: the
				// claim cannot end before it, measured from here (measured
				// from after the request's set-up, a loaded -race run saw
				// the 1 ms departure 0.46 ms into the call).
				start := time.Now()
				if c.goneAt == 0 {
					cancel()
				} else if c.goneAt > 0 {
					time.AfterFunc(c.goneAt, cancel)
				}
				r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders/1", strings.NewReader(`{"a":1}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "k-1")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				took := time.Since(start)
				wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
				if err, _ := last.Load().(error); n.Load() != 1 || !errors.Is(err, c.want) {
					t.Errorf("StoreError hook: %d calls, last error %v; want 1 with %v", n.Load(), err, c.want)
				}
				// Ends when it should: not before, and well before the
				// half-minute bound (generous for a loaded machine).
				if took < c.earliest || took > 10*time.Second {
					t.Errorf("the claim ended after %v, want from %v on, and soon", took, c.earliest)
				}
				if next.calls.Load() != 0 {
					t.Error("the handler ran")
				}
			})
		}
	}
}
