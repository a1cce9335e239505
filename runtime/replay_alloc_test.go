package runtime_test

import (
	"net/http"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// A replay allocates once (the array of replayed header values): the
// fingerprint's inputs, the path parameters among them, stay on the stack.
func TestReplayAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, benchPolicy())
	if err != nil {
		t.Fatal(err)
	}
	h := mw(benchHandler())
	r, body := benchRequest("replayed-key")
	w := &benchWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	allocs := testing.AllocsPerRun(200, func() {
		body.off = 0
		w.reset()
		h.ServeHTTP(w, r)
	})
	if w.code != http.StatusCreated {
		t.Fatalf("status %d", w.code)
	}
	if allocs > 1 {
		t.Errorf("a replay allocates %v times, want 1", allocs)
	}
}
