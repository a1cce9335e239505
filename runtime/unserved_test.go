package runtime_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

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

// A wrapper mounted twice on one request's path (a Wrap inside the
// Middleware, or two Middlewares) over one store: the inner one would find
// the outer one's claim and answer 409 in-progress to every request, for
// ever, while clients retry. It answers 500 mounted-twice instead, naming
// the operation; the outer one saves nothing (500 is not in save), so the
// key runs once the wiring is fixed. Over two stores both claim, as before.
func TestMountedTwice(t *testing.T) {
	st := idemrt.NewMemoryStore()
	h := &counting{}
	inner := wrap(t, idemrt.Options{Store: st}, policy(), h)
	outer := wrap(t, idemrt.Options{Store: st}, policy(), inner)
	for range 2 {
		w := wantProblem(t, do(outer, req{key: "k1", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
		if !strings.Contains(w.Detail, "createOrder") || !strings.Contains(w.Detail, "mounted twice") {
			t.Errorf("detail %q does not name the operation and the cause", w.Detail)
		}
	}
	if n := h.calls.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
	if w := do(inner, req{key: "k1", body: `{"a":1}`}); w.Code != http.StatusCreated {
		t.Errorf("the same key once the wiring is fixed: %d %s, want 201", w.Code, w.Body)
	}
	// Behind a middleware's writer that unwraps (http.ResponseController's
	// convention), too.
	rw := wrap(t, idemrt.Options{Store: st}, policy(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(unwrapper{w}, r)
	}))
	wantProblem(t, do(rw, req{key: "k2", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
	// With a wait, the same (at once: TestMountedTwiceDoesNotWait).
	waiting := policy(func(p *idemrt.Policy) { p.Wait = 50 * time.Millisecond })
	nested := wrap(t, idemrt.Options{Store: st}, waiting, wrap(t, idemrt.Options{Store: st}, waiting, h))
	wantProblem(t, do(nested, req{key: "k3", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
	h2 := &counting{}
	two := wrap(t, idemrt.Options{Store: idemrt.NewMemoryStore()}, policy(), wrap(t, idemrt.Options{Store: idemrt.NewMemoryStore()}, policy(), h2))
	if w := do(two, req{key: "k1", body: `{"a":1}`}); w.Code != http.StatusCreated || h2.calls.Load() != 1 {
		t.Errorf("two wrappers over two stores: %d, %d runs; want 201 and 1", w.Code, h2.calls.Load())
	}
}

// namedStore is a Store value of its own over a shared MemoryStore, named
// by id (StoreIdentifier): as two NewStore values over one database table.
type namedStore struct {
	*idemrt.MemoryStore
	id string
}

func (s *namedStore) StoreIdentity() string { return s.id }

// unnamed is a Store that cannot be compared (a slice field), identified
// by nothing: it is never the same store as another.
type unnamed struct {
	*idemrt.MemoryStore
	_ []int
}

// Two Store values with one identity (StoreIdentifier) are one store:
// mounted twice over them answers 500 mounted-twice, not 409 in-progress
// for ever. Two values with different identities, an identity left empty
// (unknown: the values are compared) or a store that cannot be compared
// claim apart, as over two stores.
func TestMountedTwiceOverTwoValuesOfOneStore(t *testing.T) {
	shared := idemrt.NewMemoryStore()
	nested := func(a, b idemrt.Store, h http.Handler) http.Handler {
		return wrap(t, idemrt.Options{Store: a}, policy(), wrap(t, idemrt.Options{Store: b}, policy(), h))
	}
	h := &counting{}
	same := nested(&namedStore{shared, "db/table"}, &namedStore{shared, "db/table"}, h)
	for range 2 {
		wantProblem(t, do(same, req{key: "k1", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
	}
	if h.calls.Load() != 0 {
		t.Errorf("handler ran %d times", h.calls.Load())
	}
	for _, tc := range []struct {
		name string
		a, b idemrt.Store
	}{
		{"two identities", &namedStore{idemrt.NewMemoryStore(), "db/a"}, &namedStore{idemrt.NewMemoryStore(), "db/b"}},
		{"unknown identity", &namedStore{idemrt.NewMemoryStore(), ""}, &namedStore{idemrt.NewMemoryStore(), ""}},
		{"not comparable", unnamed{MemoryStore: idemrt.NewMemoryStore()}, unnamed{MemoryStore: idemrt.NewMemoryStore()}},
	} {
		h := &counting{}
		if w := do(nested(tc.a, tc.b, h), req{key: "k1", body: `{"a":1}`}); w.Code != http.StatusCreated || h.calls.Load() != 1 {
			t.Errorf("%s: %d, %d runs; want 201 and 1", tc.name, w.Code, h.calls.Load())
		}
	}
	// The same non-comparable store in both: in-progress is all it can
	// say, and comparing does not panic.
	u := unnamed{MemoryStore: shared}
	wantProblem(t, do(nested(u, u, &counting{}), req{key: "k9", body: `{"a":1}`}), http.StatusConflict, idemrt.ProblemInProgress)
}

// The mounted-twice refusal goes out through the outer wrapper's attempt,
// which does not save it even when its save rule takes 5xx: saved, it
// would be replayed to every retry of the key for the whole ttl, after the
// wiring is fixed too.
func TestMountedTwiceNotSavedUnder5xx(t *testing.T) {
	st := idemrt.NewMemoryStore()
	save5xx := func(p *idemrt.Policy) {
		p.Save = idemrt.SaveRule{Classes: idemrt.Class2xx | idemrt.Class4xx | idemrt.Class5xx}
	}
	h := &counting{}
	inner := wrap(t, idemrt.Options{Store: st}, policy(save5xx), h)
	outer := wrap(t, idemrt.Options{Store: st}, policy(save5xx), inner)
	wantProblem(t, do(outer, req{key: "k1", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
	if w := do(inner, req{key: "k1", body: `{"a":1}`}); w.Code != http.StatusCreated || h.calls.Load() != 1 {
		t.Errorf("the same key once the wiring is fixed: %d %s, %d runs; want 201 and 1 run", w.Code, w.Body, h.calls.Load())
	}
}

// An operation that waits on a key in progress (Policy.Wait) does not wait
// on its own outer claim: mounted twice, it answers 500 at once, not after
// the wait (nor, with a wait past the lease, by taking its own key over).
func TestMountedTwiceDoesNotWait(t *testing.T) {
	st := idemrt.NewMemoryStore()
	waits := func(p *idemrt.Policy) { p.Wait = 10 * time.Second }
	inner := wrap(t, idemrt.Options{Store: st}, policy(waits), &counting{})
	outer := wrap(t, idemrt.Options{Store: st}, policy(waits), inner)
	start := time.Now()
	wantProblem(t, do(outer, req{key: "k1", body: `{"a":1}`}), http.StatusInternalServerError, idemrt.ProblemMountedTwice)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("mounted twice with a 10s wait answered after %v, want at once", d)
	}
}

// A Write after the handler returned (from a goroutine it left behind)
// fails with ErrWriteAfterReturn instead of reporting success for bytes
// that neither the client nor the replay will ever carry.
func TestWriteAfterReturn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store idemrt.Store
		p     *idemrt.Policy
	}{
		{"buffered", idemrt.NewMemoryStore(), policy()},
		{"transactional", &txStore{MemoryStore: idemrt.NewMemoryStore()}, txPolicy()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var late http.ResponseWriter
			h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
				late = w
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte("first"))
			}}
			srv := wrap(t, idemrt.Options{Store: tc.store}, tc.p, h)
			first := do(srv, req{key: "k1", body: `{}`})
			if n, err := late.Write([]byte("late")); n != 0 || !errors.Is(err, idemrt.ErrWriteAfterReturn) {
				t.Errorf("Write after the handler returned: %d, %v; want 0, ErrWriteAfterReturn", n, err)
			}
			if idemrt.DoNotSave(late) {
				t.Error("DoNotSave after the handler returned: true, want false (too late)")
			}
			// A Flush after the return neither sends the response again
			// nor lets later writes through.
			late.(http.Flusher).Flush()
			if n, err := late.Write([]byte("later")); n != 0 || !errors.Is(err, idemrt.ErrWriteAfterReturn) {
				t.Errorf("Write after the handler returned and a Flush: %d, %v; want 0, ErrWriteAfterReturn", n, err)
			}
			replay := do(srv, req{key: "k1", body: `{}`})
			if first.Body.String() != "first" || replay.Body.String() != "first" || replay.Header().Get("Idempotent-Replayed") != "true" {
				t.Errorf("first %q, replay %q (replayed %q); want both \"first\"", first.Body, replay.Body, replay.Header().Get("Idempotent-Replayed"))
			}
		})
	}
}
