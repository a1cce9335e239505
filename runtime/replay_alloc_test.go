package runtime_test

import (
	"net/http"
	"slices"
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

// A replay copies every saved value, names with several values among
// them (which grow replay's one backing array), into slices of their own:
// appending to one name's values changes no other name's.
func TestReplayCopiesEveryValue(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		for _, l := range []string{"</a>; rel=a", "</b>; rel=b", "</c>; rel=c"} {
			h.Add("Link", l)
		}
		h.Set("Location", "/orders/42")
		h.Add("Content-Language", "en")
		h.Add("Content-Language", "fr")
		h.Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusCreated)
	}}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	first := do(srv, req{key: "k", body: `{}`}).Header().Clone()
	replayed := do(srv, req{key: "k", body: `{}`}).Header()
	if got := replayed.Get("Idempotent-Replayed"); got != "true" {
		t.Fatalf("Idempotent-Replayed %q", got)
	}
	for _, name := range []string{"Content-Type", "Link", "Location", "Etag"} {
		if !slices.Equal(replayed[name], first[name]) {
			t.Errorf("%s: replayed %q, first %q", name, replayed[name], first[name])
		}
	}
	want := replayed.Clone()
	for name := range replayed {
		replayed[name] = append(replayed[name], "appended")
		for other, vs := range replayed {
			if other != name && !slices.Equal(vs, want[other]) {
				t.Fatalf("appending to %s changed %s: %q, want %q", name, other, vs, want[other])
			}
		}
		replayed[name] = want[name]
	}
}
