package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// 1,000 goroutines send the same key and body: the handler runs exactly
// once; every other caller gets a byte-identical replay or a 409.
func TestThousandConcurrentDuplicates(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Second} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			const n = 1000
			h := &counting{}
			inner := h.ServeHTTP
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(20 * time.Millisecond) // keep the claim in progress
				inner(w, r)
			})
			srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Wait = wait }), slow)
			results := make([]*httptest.ResponseRecorder, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i] = do(srv, req{key: "same-key", body: `{"amount":100,"currency":"eur"}`})
				}()
			}
			close(start)
			wg.Wait()
			if got := h.calls.Load(); got != 1 {
				t.Fatalf("handler ran %d times, want exactly 1", got)
			}
			var first *httptest.ResponseRecorder
			for _, w := range results {
				if w.Header().Get("Idempotent-Replayed") == "" && w.Code == http.StatusCreated {
					if first != nil {
						t.Fatal("two callers got a first (non-replayed) response")
					}
					first = w
				}
			}
			if first == nil {
				t.Fatal("no caller got the handler's own response")
			}
			var replays, conflicts int
			for _, w := range results {
				if w == first {
					continue
				}
				switch w.Code {
				case http.StatusConflict:
					wantProblem(t, w, 409, idemrt.ProblemInProgress)
					conflicts++
				case http.StatusCreated:
					replays++
					if !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) {
						t.Fatalf("replayed body %q, want %q", w.Body, first.Body)
					}
					if w.Header().Get("Idempotent-Replayed") != "true" {
						t.Fatal("replay without Idempotent-Replayed")
					}
					for _, name := range []string{"Content-Type", "Location", "Etag"} {
						if w.Header().Get(name) != first.Header().Get(name) {
							t.Fatalf("replayed %s = %q, want %q", name, w.Header().Get(name), first.Header().Get(name))
						}
					}
					if strings.Join(w.Header().Values("Link"), "|") != strings.Join(first.Header().Values("Link"), "|") {
						t.Fatal("replayed Link differs")
					}
					if w.Header().Get("Set-Cookie") != "" {
						t.Fatal("Set-Cookie replayed")
					}
				default:
					t.Fatalf("unexpected response %d %s", w.Code, w.Body)
				}
			}
			if wait > 0 && conflicts != 0 {
				t.Errorf("with wait=%v, %d callers got 409; want all replays", wait, conflicts)
			}
			t.Logf("1 run, %d replays, %d conflicts", replays, conflicts)
		})
	}
}

// Many distinct keys at once: each runs exactly once.
func TestConcurrentDistinctKeys(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('A'+i/26))
			for j := 0; j < 3; j++ {
				do(srv, req{key: key, body: `{}`})
			}
		}()
	}
	wg.Wait()
	if h.calls.Load() != 200 {
		t.Fatalf("calls %d, want 200", h.calls.Load())
	}
}

// txStore wraps MemoryStore's transactions with failure injection and
// records what happened.
type txStore struct {
	*idemrt.MemoryStore
	commitErr error
	commits   atomic.Int64
	rollbacks atomic.Int64
}

type spyTx struct {
	idemrt.Tx
	s *txStore
}

func (s *txStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	tx, err := s.MemoryStore.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	return &spyTx{Tx: tx, s: s}, nil
}

func (t *spyTx) Commit(ctx context.Context) error {
	if t.s.commitErr != nil {
		_ = t.Tx.Rollback(ctx)
		return t.s.commitErr
	}
	t.s.commits.Add(1)
	return t.Tx.Commit(ctx)
}

func (t *spyTx) Rollback(ctx context.Context) error {
	t.s.rollbacks.Add(1)
	return t.Tx.Rollback(ctx)
}

func txPolicy() *idemrt.Policy {
	return policy(func(p *idemrt.Policy) { p.Transactional = true })
}

func TestTransactionalCommitThenReplay(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	var sawTx bool
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		_, sawTx = idemrt.TxFromContext(r.Context())
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "created")
	}}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 || w.Body.String() != "created" {
		t.Fatalf("first %d %q", w.Code, w.Body)
	}
	if !sawTx {
		t.Fatal("TxFromContext found no transaction in the handler")
	}
	if st.commits.Load() != 1 || st.rollbacks.Load() != 0 {
		t.Fatalf("commits %d rollbacks %d", st.commits.Load(), st.rollbacks.Load())
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != "created" {
		t.Fatalf("replay %d %q", w.Code, w.Body)
	}
	if _, ok := idemrt.TxFromContext(context.Background()); ok {
		t.Fatal("TxFromContext found a transaction in a bare context")
	}
}

func TestTransactionalOutsideSaveRollsBack(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 500 {
		t.Fatal(w.Code)
	}
	do(srv, req{key: "k", body: `{}`})
	if h.calls.Load() != 2 || st.rollbacks.Load() != 2 || st.commits.Load() != 0 {
		t.Fatalf("calls %d rollbacks %d commits %d; want 2 rolled-back runs", h.calls.Load(), st.rollbacks.Load(), st.commits.Load())
	}
}

func TestTransactionalCommitFailureIs503AndReleases(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore(), commitErr: errors.New("serialization failure")}
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "yes")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "created")
	}}
	inner := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*") // outer middleware
		inner.ServeHTTP(w, r)
	})
	w := do(srv, req{key: "k", body: `{}`})
	wantProblem(t, w, 503, idemrt.ProblemStoreUnavailable)
	if w.Header().Get("X-Handler") != "" {
		t.Error("the 503 carries the handler's headers")
	}
	if w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Error("the 503 lost the outer middleware's headers")
	}
	st.commitErr = nil
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 || h.calls.Load() != 2 {
		t.Fatalf("retry after a failed commit: %d calls %d; want a fresh run", w.Code, h.calls.Load())
	}
}

func TestTransactionalPanicRollsBack(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 1 {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(201)
	}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Fatalf("recovered %v", p)
			}
		}()
		do(srv, req{key: "k", body: `{}`})
	}()
	if st.rollbacks.Load() != 1 {
		t.Fatalf("rollbacks %d", st.rollbacks.Load())
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 {
		t.Fatalf("after panic: %d", w.Code)
	}
}

func TestTransactionalFlushWaitsForCommit(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	var flushedEarly bool
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part")
		_ = http.NewResponseController(w).Flush()
		rec := w.(interface{ Unwrap() http.ResponseWriter }).Unwrap().(*httptest.ResponseRecorder)
		flushedEarly = rec.Body.Len() > 0
		if _, _, err := http.NewResponseController(w).Hijack(); err == nil {
			t.Error("Hijack succeeded in transactional mode")
		}
	}}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Body.String() != "part" {
		t.Fatalf("body %q", w.Body)
	}
	if flushedEarly {
		t.Fatal("transactional mode sent data before the commit")
	}
}

func TestTransactionalFencedRollsBack(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	started := make(chan struct{})
	release := make(chan struct{})
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(201)
	}
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) { p.Transactional = true; p.Lease = time.Second }), h)
	slow := make(chan *httptest.ResponseRecorder)
	go func() { slow <- do(srv, req{key: "k", body: `{}`}) }()
	<-started
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 {
		t.Fatalf("takeover %d", w.Code)
	}
	close(release)
	wantProblem(t, <-slow, 503, idemrt.ProblemStoreUnavailable)
	if st.commits.Load() != 1 {
		t.Fatalf("commits %d; the fenced transaction must roll back", st.commits.Load())
	}
}
