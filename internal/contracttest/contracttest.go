// Package contracttest holds what tests of whole servers share (the
// framework adapters, the examples): JSON requests over real HTTP and
// checks of the idempotency contract's responses.
package contracttest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Serve starts h over real HTTP until the test ends and returns its base URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Response is what a client received.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Post sends a JSON POST to url with an Idempotency-Key (none when key is
// empty) and the header pairs of kv (name, value, ...).
func Post(t testing.TB, url, key, body string, kv ...string) Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Replayed fails unless replay is first replayed: the same status, body
// and Content-Type, with Idempotent-Replayed: true; first itself must not
// be marked as a replay.
func Replayed(t testing.TB, first, replay Response) {
	t.Helper()
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first response is marked as a replay")
	}
	if replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: Idempotent-Replayed %q, want true (status %d, body %s)", replay.Header.Get("Idempotent-Replayed"), replay.Status, replay.Body)
	}
	if replay.Status != first.Status || replay.Body != first.Body {
		t.Errorf("retry got %d %q, want the first response %d %q", replay.Status, replay.Body, first.Status, first.Body)
	}
	if a, b := first.Header.Get("Content-Type"), replay.Header.Get("Content-Type"); a != b {
		t.Errorf("retry Content-Type %q, want %q", b, a)
	}
}

// Problem fails unless res is an RFC 9457 problem with status and type
// (idemrt.Problem* constant).
func Problem(t testing.TB, res Response, status int, typ string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status %d, want %d (body %s)", res.Status, status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(res.Body), &p); err != nil || p.Type != typ {
		t.Errorf("problem type %q (%v), want %s", p.Type, err, typ)
	}
}

// Policy is an anonymous header-key policy of POST route; mod changes it.
func Policy(id, route string, mod ...func(*idemrt.Policy)) *idemrt.Policy {
	p := &idemrt.Policy{
		OperationID: id,
		Method:      http.MethodPost,
		Route:       route,
		Key:         idemrt.KeyFromHeader,
		KeyName:     "Idempotency-Key",
		Principal:   idemrt.PrincipalAnonymous,
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

// Basics checks the contract's core through a framework adapter, against
// the server at url: its POST /charges is protected by
// Policy("createCharge", "/charges") and answers 201 with Location
// /charges/ch_<n> for its nth run (runs counts them); its POST /slow is
// protected by Policy("slow", "/slow"), closes started, waits for release
// and answers 204. A retry replays (Location too), a changed body is 422,
// a missing key 400, the handler runs once; a duplicate of the slow
// request while it runs is 409 with Retry-After, and its 204 (no body) is
// saved and replayed.
func Basics(t *testing.T, url string, runs *atomic.Int64, started, release chan struct{}) {
	t.Helper()
	first := Post(t, url+"/charges", "k1", `{"amount":100}`)
	if first.Status != http.StatusCreated || first.Header.Get("Location") != "/charges/ch_1" {
		t.Fatalf("first: %d %v %s", first.Status, first.Header, first.Body)
	}
	retry := Post(t, url+"/charges", "k1", `{"amount":100}`)
	Replayed(t, first, retry)
	if retry.Header.Get("Location") != "/charges/ch_1" {
		t.Errorf("replayed Location %q", retry.Header.Get("Location"))
	}
	Problem(t, Post(t, url+"/charges", "k1", `{"amount":500}`), http.StatusUnprocessableEntity, idemrt.ProblemFingerprintMismatch)
	Problem(t, Post(t, url+"/charges", "", `{"amount":100}`), http.StatusBadRequest, idemrt.ProblemKeyMissing)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}

	var wg sync.WaitGroup
	var slow Response
	wg.Go(func() { slow = Post(t, url+"/slow", "s1", `{}`) })
	<-started
	dup := Post(t, url+"/slow", "s1", `{}`)
	close(release)
	wg.Wait()
	Problem(t, dup, http.StatusConflict, idemrt.ProblemInProgress)
	if dup.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	if slow.Status != http.StatusNoContent {
		t.Errorf("first slow request: %d", slow.Status)
	}
	Replayed(t, slow, Post(t, url+"/slow", "s1", `{}`))
}

// BenchmarkReplay measures a replay of POST /charges through h, a
// framework's router named name with the adapter protecting the route by p
// (a header-key policy) on a MemoryStore, in process; the net/http case
// is idemrt.NewMiddleware around a ServeMux, for comparison.
func BenchmarkReplay(b *testing.B, name string, h http.Handler, p *idemrt.Policy) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	})
	std, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, p)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{name, h}, {"net-http", std(mux)}} {
		b.Run(c.name, func(b *testing.B) {
			serve := func() int {
				r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "bench")
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				return w.Code
			}
			if code := serve(); code != http.StatusCreated {
				b.Fatalf("first: %d", code)
			}
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}
