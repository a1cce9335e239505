package runtime_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// unwrapper is a middleware's wrapper of the ResponseWriter, reachable
// through Unwrap as http.ResponseController expects.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// declining answers 201 "pending" and declines to save it; flush flushes
// first, wrapped passes a wrapper of w.
func declining(t *testing.T, flush, wrapped bool) *counting {
	return &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "pending")
		if flush {
			w.(http.Flusher).Flush()
		}
		var dw http.ResponseWriter = w
		if wrapped {
			dw = unwrapper{w}
		}
		if !idemrt.DoNotSave(dw) {
			t.Error("DoNotSave reported false in the handler")
		}
	}}
}

func TestDoNotSave(t *testing.T) {
	for _, tc := range []struct {
		name           string
		flush, wrapped bool
	}{{"buffered", false, false}, {"flushed", true, false}, {"wrapped", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := declining(t, tc.flush, tc.wrapped)
			srv := wrap(t, idemrt.Options{}, policy(), h)
			for i := range 2 {
				w := do(srv, req{key: "k", body: `{}`})
				if w.Code != http.StatusCreated || w.Body.String() != "pending" || w.Header().Get("Idempotent-Replayed") != "" {
					t.Fatalf("request %d: %d %q replayed=%q; want the handler's 201 each time", i, w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
				}
			}
			if h.calls.Load() != 2 {
				t.Errorf("handler ran %d times, want 2 (the key was released)", h.calls.Load())
			}
		})
	}
}

func TestDoNotSaveTransactionalRollsBack(t *testing.T) {
	st := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	h := declining(t, false, false)
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	for i := range 2 {
		if w := do(srv, req{key: "k", body: `{}`}); w.Code != http.StatusCreated || w.Body.String() != "pending" {
			t.Fatalf("request %d: %d %q", i, w.Code, w.Body)
		}
	}
	if h.calls.Load() != 2 || st.rollbacks.Load() != 2 || st.commits.Load() != 0 {
		t.Fatalf("calls %d rollbacks %d commits %d; want 2 rolled-back runs", h.calls.Load(), st.rollbacks.Load(), st.commits.Load())
	}
}

func TestDoNotSaveTooLateOrElsewhere(t *testing.T) {
	if idemrt.DoNotSave(httptest.NewRecorder()) {
		t.Error("DoNotSave on a plain ResponseWriter reported true")
	}
	if idemrt.DoNotSave(unwrapper{}) {
		t.Error("DoNotSave on a wrapper of nothing reported true")
	}
	// Past max-response-bytes the record is a tombstone already.
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 64))
		if idemrt.DoNotSave(w) {
			t.Error("DoNotSave after the record became a tombstone reported true")
		}
	}}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.MaxResponseBytes = 16 }), h)
	do(srv, req{key: "k", body: `{}`})
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != http.StatusConflict || h.calls.Load() != 1 {
		t.Errorf("retry: %d after %d runs; want 409 (tombstone) after 1", w.Code, h.calls.Load())
	}
}

// TestTransactionalTooLargeRollsBack: a transactional response past
// max-response-bytes is dropped (it can be neither saved nor sent before
// the commit): the transaction rolls back, the client gets 500
// response-too-large in its place, with the headers set before the
// handler only, and the key runs again on a retry (nothing of the attempt
// happened), on both paths: one commit (BeginClaim), and a claim committed
// before the transaction (a TxStore without BeginClaim), which is released.
func TestTransactionalTooLargeRollsBack(t *testing.T) {
	one := &claimTxStore{MemoryStore: idemrt.NewMemoryStore()}
	two := &txStore{MemoryStore: idemrt.NewMemoryStore()}
	for _, tc := range []struct {
		name               string
		store              idemrt.Store
		commits, rollbacks func() int64
	}{
		{"one commit", one, one.commits.Load, one.rollbacks.Load},
		{"two commits", two, two.commits.Load, two.rollbacks.Load},
	} {
		var errs []error
		h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Handler", "set")
			w.WriteHeader(http.StatusCreated)
			_, err1 := w.Write(make([]byte, 10))
			_, err2 := w.Write(make([]byte, 10))
			_, err3 := w.Write(make([]byte, 1))
			errs = append(errs, err1, err2, err3)
		}}
		inner := wrap(t, idemrt.Options{Store: tc.store}, policy(func(p *idemrt.Policy) { p.Transactional = true; p.MaxResponseBytes = 16 }), h)
		srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Outer", "kept")
			inner.ServeHTTP(w, r)
		})
		for i := range 2 {
			w := do(srv, req{key: "k", body: `{}`})
			p := wantProblem(t, w, http.StatusInternalServerError, idemrt.ProblemResponseTooLarge)
			if !strings.Contains(p.Detail, "rolled back") || w.Header().Get("X-Outer") != "kept" || w.Header().Get("X-Handler") != "" {
				t.Errorf("%s, request %d: detail %q, headers %v", tc.name, i, p.Detail, w.Header())
			}
		}
		if h.calls.Load() != 2 || tc.commits() != 0 || tc.rollbacks() != 2 {
			t.Errorf("%s: calls %d commits %d rollbacks %d; want 2 rolled-back runs", tc.name, h.calls.Load(), tc.commits(), tc.rollbacks())
		}
		for i, err := range errs {
			if want := i%3 != 0; errors.Is(err, idemrt.ErrResponseTooLarge) != want {
				t.Errorf("%s: write %d: %v", tc.name, i%3, err)
			}
		}
	}
}
