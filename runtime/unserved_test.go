package runtime_test

import (
	"net/http"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// The naive wiring: the middleware in front of a mux that does not serve
// the operation's path (the handler was registered under another prefix),
// so the mux answers 404 (or 405 for a path it serves with another
// method). The router's answer is not the operation's result: it must not
// be saved, so that once the wiring is fixed the same key runs the handler
// instead of replaying the 404 until the record expires.
func TestRouterAnswersAreNotSaved(t *testing.T) {
	store := idemrt.NewMemoryStore()
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: store}, policy())
	if err != nil {
		t.Fatal(err)
	}
	h := &counting{}
	for _, tc := range []struct {
		name   string
		key    string
		mux    func() *http.ServeMux
		status int
	}{
		{"unserved path", "k404", func() *http.ServeMux {
			m := http.NewServeMux()
			m.Handle("POST /api/orders/{id}", h) // mounted elsewhere
			return m
		}, http.StatusNotFound},
		{"unserved method", "k405", func() *http.ServeMux {
			m := http.NewServeMux()
			m.Handle("PUT /orders/{id}", h)
			return m
		}, http.StatusMethodNotAllowed},
	} {
		broken := mw(tc.mux())
		for range 2 {
			if w := do(broken, req{key: tc.key, body: `{}`}); w.Code != tc.status || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("%s: status %d replayed %q, want the router's %d each time", tc.name, w.Code, w.Header().Get("Idempotent-Replayed"), tc.status)
			}
		}
		// The wiring is fixed: the same key runs the handler.
		fixed := http.NewServeMux()
		fixed.Handle("POST /orders/{id}", h)
		before := h.calls.Load()
		if w := do(mw(fixed), req{key: tc.key, body: `{}`}); w.Code != http.StatusCreated || h.calls.Load() != before+1 {
			t.Fatalf("%s, after the fix: status %d (replayed %q), handler ran %d times; want 201 from the handler", tc.name, w.Code, w.Header().Get("Idempotent-Replayed"), h.calls.Load()-before)
		}
	}
}
