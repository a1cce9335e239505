package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestEscapedPathIsProtected: ServeMux routes "/ord%65rs/1" to the handler of
// "/orders/{id}", so the middleware must see the same operation there:
// a retry with another spelling of the path replays, and a request without
// a key is refused, instead of passing through unprotected.
func TestEscapedPathIsProtected(t *testing.T) {
	h := &counting{}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", h)
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, policy())
	if err != nil {
		t.Fatal(err)
	}
	srv := mw(mux)
	send := func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"n":1}`))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	if w := send("/orders/1", "k1"); w.Code != http.StatusCreated {
		t.Fatalf("first request: %d %s", w.Code, w.Body)
	}
	w := send("/ord%65rs/1", "k1")
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("same key on an escaped spelling of the path: %d replayed=%q, want a replay", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if w := send("/ord%65rs/%31", ""); w.Code != http.StatusBadRequest {
		t.Errorf("escaped path without a key: %d, want 400", w.Code)
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
