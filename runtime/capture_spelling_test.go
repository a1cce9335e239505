package runtime_test

import (
	"net/http"
	"slices"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// valuesAnySpelling collects the values of a header under every spelling
// of its name, in the order net/http writes them (names sorted).
func valuesAnySpelling(h http.Header, name string) []string {
	var names []string
	for k := range h {
		if http.CanonicalHeaderKey(k) == name {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []string
	for _, k := range names {
		out = append(out, h[k]...)
	}
	return out
}

// A replayable header set under a non-canonical name reaches the replay
// with every value; never-replayed headers stay out in any spelling.
func TestReplayKeepsNonCanonicalHeaderNames(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["x-request-id"] = []string{"rid-1", "rid-2"}
		hd["X-Trace"] = []string{"t-canonical"}
		hd["x-trace"] = []string{"t-lower"}
		hd["location"] = []string{"/orders/7"}
		hd["content-type"] = []string{"application/json"}
		hd["set-cookie"] = []string{"session=secret"}
		hd["SET-COOKIE"] = []string{"other=secret"}
		hd["authorization"] = []string{"Bearer x"}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) {
		p.ReplayHeaders = []string{"X-Request-Id", "x-trace", "set-cookie"}
	}), h)
	first := do(srv, req{key: "k1", body: `{"a":1}`})
	second := do(srv, req{key: "k1", body: `{"a":1}`})
	if h.calls.Load() != 1 || second.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("handler ran %d times; second replayed=%q", h.calls.Load(), second.Header().Get("Idempotent-Replayed"))
	}
	for _, name := range []string{"X-Request-Id", "X-Trace", "Location", "Content-Type"} {
		got, want := valuesAnySpelling(second.Header(), name), valuesAnySpelling(first.Header(), name)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: replayed %q, first response %q", name, got, want)
		}
	}
	for _, name := range []string{"Set-Cookie", "Authorization"} {
		if got := valuesAnySpelling(second.Header(), name); len(got) > 0 {
			t.Errorf("%s replayed (%q), must never be", name, got)
		}
	}
}
