package runtime_test

import (
	"io"
	"net/http"
	"net/http/httptest"
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
