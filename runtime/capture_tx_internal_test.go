package runtime

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTransactionalResponseMemoryBounded: a transactional handler streaming
// far past max-response-bytes holds no more than the cap in memory, and
// learns at the write that crosses it (its whole response was buffered
// until the commit).
func TestTransactionalResponseMemoryBounded(t *testing.T) {
	const limit, chunk, total = 64 << 10, 4 << 10, 8 << 20
	peak, writes, failed := 0, 0, 0
	var firstErr error
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := w.(*captureWriter)
		p := make([]byte, chunk)
		for range total / chunk {
			writes++
			if _, err := w.Write(p); err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			}
			peak = max(peak, len(cw.buf))
		}
	})
	p := &Policy{OperationID: "op", Method: http.MethodPost, Route: "/x", Key: KeyFromHeader, KeyName: "Idempotency-Key",
		Principal: PrincipalAnonymous, Transactional: true, MaxResponseBytes: limit}
	srv, err := Wrap(Options{Store: NewMemoryStore()}, p, h)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if peak > limit {
		t.Errorf("buffered %d bytes of a %d-byte response, past the cap %d", peak, total, limit)
	}
	if want := writes - limit/chunk; failed != want || !errors.Is(firstErr, ErrResponseTooLarge) {
		t.Errorf("%d of %d writes failed (first: %v); want the %d past the cap to fail with ErrResponseTooLarge", failed, writes, firstErr, want)
	}
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), ProblemResponseTooLarge) {
		t.Errorf("got %d (%d bytes); want 500 response-too-large", w.Code, w.Body.Len())
	}
}
