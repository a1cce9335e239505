package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestTransactionalSaveSurvivesDisconnect: a client that hangs up after its
// transactional handler finished does not undo the work: the transaction
// commits with the completion (they do not run on the request's context),
// and the retry replays instead of running the handler again.
func TestTransactionalSaveSurvivesDisconnect(t *testing.T) {
	h := &counting{}
	var hangUp context.CancelFunc
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := idemrt.TxFromContext(r.Context()); !ok {
			t.Error("no transaction in the handler's context")
		}
		h.ServeHTTP(w, r)
		hangUp() // the client goes away once the handler is done
	})
	srv, err := idemrt.Wrap(idemrt.Options{Store: idemrt.NewMemoryStore()}, policy(func(p *idemrt.Policy) { p.Transactional = true }), inner)
	if err != nil {
		t.Fatal(err)
	}
	send := func() *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hangUp = cancel
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders/1", strings.NewReader(`{"n":1}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	send()
	w := send()
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry after the client hung up: %d replayed=%q, want a replay of 201", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
