package runtime_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// trickle is a request body that delivers a few bytes and then ends early,
// as a client that declares a large Content-Length and sends one packet.
type trickle struct{ r io.Reader }

func (t *trickle) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (t *trickle) Close() error { return nil }

// The body reader allocates for the bytes that arrive, not for the
// Content-Length the client declares: requests that declare just under
// max-request-bytes (4 MiB) and send 8 bytes must not cost megabytes each.
func TestBodyMemoryFollowsArrivedBytes(t *testing.T) {
	srv := wrap(t, idemrt.Options{}, policy(), &counting{})
	const n = 16
	send := func() {
		r := httptest.NewRequest(http.MethodPost, "/orders/1", nil)
		r.Body = &trickle{r: strings.NewReader(`{"a":12}`)}
		r.ContentLength = 4<<20 - 1
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400 for a body that ends early", w.Code)
		}
	}
	send() // warm the pools
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		send()
	}
	goruntime.ReadMemStats(&after)
	// Reading the declared length up front costs 4 MiB a request; growing
	// with the arrived bytes costs a few KiB.
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 256<<10 {
		t.Errorf("%d bytes allocated per request that sent 8 bytes (declared %d)", per, 4<<20-1)
	}
}
