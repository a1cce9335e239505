package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func principalFromHeader(r *http.Request) (string, error) {
	u := r.Header.Get("X-User")
	if u == "fail" {
		return "", errors.New("token expired")
	}
	return u, nil
}

func TestPrincipalIsolationAndHashing(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st, Principal: principalFromHeader}, policy(func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }), h)
	alice := do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"alice"}}})
	bob := do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"bob"}}})
	if h.calls.Load() != 2 || alice.Body.String() == bob.Body.String() {
		t.Fatalf("two principals with one key: calls %d; bodies %q %q; want independent runs", h.calls.Load(), alice.Body, bob.Body)
	}
	// Same principal, other key space only for other users: alice replays hers.
	again := do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"alice"}}})
	if again.Body.String() != alice.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("alice's retry got %q, want her own replay %q", again.Body, alice.Body)
	}
	// Even with a different body, bob never sees alice's record (422 would leak it exists).
	if w := do(srv, req{key: "k2", body: `{"x":1}`, header: http.Header{"X-User": {"alice"}}}); w.Code != 201 {
		t.Fatal(w.Code)
	}
	if w := do(srv, req{key: "k2", body: `{"x":2}`, header: http.Header{"X-User": {"bob"}}}); w.Code != 201 {
		t.Fatalf("bob reusing alice's key with another body got %d, want his own run", w.Code)
	}
	for _, c := range st.claims {
		if c.PrincipalHash != idemrt.HashPrincipal("alice") && c.PrincipalHash != idemrt.HashPrincipal("bob") {
			t.Errorf("claim with principal hash %x, want HashPrincipal of the caller", c.PrincipalHash)
		}
		if strings.Contains(c.Key, "alice") || strings.Contains(c.Scope, "alice") {
			t.Errorf("principal stored in clear: %+v", c.RecordKey)
		}
	}
}

func TestPrincipalErrorsAre401(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st, Principal: principalFromHeader}, policy(func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }), h)
	wantProblem(t, do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"fail"}}}), 401, idemrt.ProblemUnauthenticated)
	wantProblem(t, do(srv, req{key: "k", body: `{}`}), 401, idemrt.ProblemUnauthenticated) // empty principal
	if h.calls.Load() != 0 || len(st.claims) != 0 {
		t.Fatal("handler ran or key claimed without a principal")
	}
}

// TestUnauthorizedChallenges: the 401 carries the operation's challenges
// (RFC 9110 §11.6.1), every one, in order; without any it carries none.
func TestUnauthorizedChallenges(t *testing.T) {
	challenges := []string{"Bearer", `Basic realm="Payments API"`}
	srv := wrap(t, idemrt.Options{Principal: principalFromHeader}, policy(func(p *idemrt.Policy) {
		p.Principal = idemrt.PrincipalAuth
		p.Challenges = challenges
	}), &counting{})
	w := do(srv, req{key: "k", body: `{}`})
	wantProblem(t, w, 401, idemrt.ProblemUnauthenticated)
	if got := w.Header().Values("WWW-Authenticate"); !slices.Equal(got, challenges) {
		t.Errorf("WWW-Authenticate = %q, want %q", got, challenges)
	}
	if w := do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"alice"}}}); w.Code != 201 || w.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("an identified caller got %d with WWW-Authenticate %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	bare := wrap(t, idemrt.Options{Principal: principalFromHeader}, policy(func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }), &counting{})
	if w := do(bare, req{key: "k", body: `{}`}); w.Code != 401 || len(w.Header().Values("WWW-Authenticate")) != 0 {
		t.Errorf("without challenges: %d with WWW-Authenticate %q, want 401 and none", w.Code, w.Header().Values("WWW-Authenticate"))
	}
}

func TestAnonymousSharesOneKeySpace(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{Principal: principalFromHeader}, policy(), h)
	do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"alice"}}})
	w := do(srv, req{key: "k", body: `{}`, header: http.Header{"X-User": {"bob"}}})
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatal("anonymous operation: a second caller with the same key did not replay")
	}
}

func TestStartupErrors(t *testing.T) {
	st := idemrt.NewMemoryStore()
	cases := []struct {
		name string
		opts idemrt.Options
		p    []*idemrt.Policy
		want string
	}{
		{"nil store", idemrt.Options{}, []*idemrt.Policy{policy()}, "Options.Store is nil"},
		{"auth without principal", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth })}, "operation createOrder: principal mode is auth"},
		{"default principal is auth", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Principal = 0 })}, "Options.Principal is nil"},
		{"transactional without TxStore", idemrt.Options{Store: struct{ idemrt.Store }{st}}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Transactional = true })}, "needs a store that implements TxStore"},
		{"duplicate route", idemrt.Options{Store: st}, []*idemrt.Policy{policy(), policy(func(p *idemrt.Policy) { p.OperationID = "other"; p.Route = "/orders/{orderId}" })}, "operations createOrder and other both claim POST /orders/{orderId}"},
		{"ttl shorter than lease", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.TTL = time.Second; p.Lease = time.Minute })}, "ttl 1s is shorter than lease 1m0s"},
		{"include and exclude", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.FingerprintInclude = []string{"/a"}; p.FingerprintExclude = []string{"/b"} })}, "include and exclude are both set"},
		{"bad pointer", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.FingerprintExclude = []string{"a/b"} })}, `JSON pointer "a/b" does not start with /`},
		{"bad route", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Route = "/orders/{id" })}, "unclosed {"},
		{"bad method", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Method = "post" })}, `method "post"`},
		{"fields without fields", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Key = idemrt.KeyFromFields; p.KeyName = "" })}, "needs KeyFields"},
		{"query without name", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Key = idemrt.KeyFromQuery; p.KeyName = "" })}, "needs KeyName"},
		{"bad save code", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Save.Codes = []int{42} })}, "status 42"},
		{"negative size", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.MaxRequestBytes = -1 })}, "negative max"},
		{"nil policy", idemrt.Options{Store: st}, []*idemrt.Policy{nil}, "nil *Policy"},
		{"challenge with a line break", idemrt.Options{Store: st, Principal: principalFromHeader}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Challenges = []string{"Bearer\r\nX-Evil: 1"} })}, "is not a WWW-Authenticate challenge"},
		{"challenge on an anonymous operation", idemrt.Options{Store: st}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Challenges = []string{"Bearer"} })}, "Challenges set on an anonymous operation"},
		{"challenge without a scheme", idemrt.Options{Store: st, Principal: principalFromHeader}, []*idemrt.Policy{policy(func(p *idemrt.Policy) { p.Challenges = []string{` realm="x"`} })}, "is not a WWW-Authenticate challenge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idemrt.NewMiddleware(tc.opts, tc.p...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewMiddleware error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Every problem is reported, not only the first.
	_, err := idemrt.NewMiddleware(idemrt.Options{Store: st},
		policy(func(p *idemrt.Policy) { p.OperationID = "a"; p.Principal = idemrt.PrincipalAuth }),
		policy(func(p *idemrt.Policy) {
			p.OperationID = "b"
			p.Route = "/b"
			p.TTL = time.Second
			p.Lease = time.Minute
		}))
	if err == nil || !strings.Contains(err.Error(), "operation a:") || !strings.Contains(err.Error(), "operation b:") {
		t.Fatalf("error = %v, want both operations reported", err)
	}
}

func TestMiddlewareRouting(t *testing.T) {
	mux := http.NewServeMux()
	var hits []string
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hits = append(hits, name+":"+r.PathValue("id"))
			w.WriteHeader(201)
			_, _ = io.WriteString(w, name)
		}
	}
	mux.Handle("POST /v1/orders/{id}", record("order"))
	mux.Handle("POST /v1/orders/special", record("special"))
	mux.Handle("POST /v1/plain", record("plain"))
	mux.Handle("POST /v1/files/{name}", record("file"))
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: st},
		policy(func(p *idemrt.Policy) { p.BasePaths = []string{"/v1/"} }),
		policy(func(p *idemrt.Policy) {
			p.OperationID = "special"
			p.Route = "/orders/special"
			p.BasePaths = []string{"/v1"}
		}),
		policy(func(p *idemrt.Policy) {
			p.OperationID = "file"
			p.Route = "/files/{name}.{ext}"
			p.BasePaths = []string{"/v1"}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	srv := mw(mux)

	// Unannotated route: untouched, no key needed, nothing claimed.
	if w := do(srv, req{path: "/v1/plain", body: `{}`}); w.Code != 201 || len(st.claims) != 0 {
		t.Fatalf("unannotated route: %d, claims %d", w.Code, len(st.claims))
	}
	// Annotated: needs a key.
	wantProblem(t, do(srv, req{path: "/v1/orders/7", body: `{}`}), 400, idemrt.ProblemKeyMissing)
	// Method not annotated: untouched.
	if w := do(srv, req{method: "PUT", path: "/v1/orders/7", body: `{}`}); w.Code == 400 {
		t.Fatal("PUT went through the engine")
	}
	// Route without the base path is not protected.
	if w := do(srv, req{path: "/orders/7", body: `{}`}); w.Code != 404 {
		t.Fatalf("path outside the base path: %d", w.Code)
	}
	// Trailing slash is significant.
	if w := do(srv, req{path: "/v1/orders/7/", body: `{}`}); w.Code == 400 {
		t.Fatal("/v1/orders/7/ matched /v1/orders/{id}")
	}
	// The literal route wins over the parameter, under its own scope.
	do(srv, req{path: "/v1/orders/special", key: "k", body: `{}`})
	if len(st.claims) != 1 || st.claims[0].Scope != "special" {
		t.Fatalf("claims %+v, want one in scope special", st.claims)
	}
	do(srv, req{path: "/v1/orders/7", key: "k", body: `{}`})
	if st.claims[1].Scope != "createOrder" {
		t.Fatalf("scope %q, want createOrder", st.claims[1].Scope)
	}
	// Partial-segment parameters; escaped path values.
	do(srv, req{path: "/v1/files/report%2Fq1.pdf", key: "f", body: `{}`})
	if n := len(st.claims); n != 3 || st.claims[2].Scope != "file" {
		t.Fatalf("file route not protected: %+v", st.claims)
	}
	if w := do(srv, req{path: "/v1/files/noext", key: "f2", body: `{}`}); len(st.claims) != 3 {
		t.Fatalf("/v1/files/noext matched {name}.{ext}: %d", w.Code)
	}
	// Different path parameter with the same key: 422.
	wantProblem(t, do(srv, req{path: "/v1/orders/8", key: "k", body: `{}`}), 422, idemrt.ProblemFingerprintMismatch)
}

func TestWrapUnderServeMuxPathValues(t *testing.T) {
	h := &counting{}
	wrapped := wrap(t, idemrt.Options{}, policy(), h)
	mux := http.NewServeMux()
	mux.Handle("POST /api/orders/{id}", wrapped) // mounted elsewhere than Route
	do(mux, req{path: "/api/orders/1", key: "k", body: `{}`})
	if w := do(mux, req{path: "/api/orders/1", key: "k", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay under ServeMux: %d", w.Code)
	}
	wantProblem(t, do(mux, req{path: "/api/orders/2", key: "k", body: `{}`}), 422, idemrt.ProblemFingerprintMismatch)
}

func TestKeyFromQuery(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Key = idemrt.KeyFromQuery; p.KeyName = "request_id" }), h)
	do(srv, req{path: "/orders/1?request_id=abc%21&x=1", body: `{}`})
	if w := do(srv, req{path: "/orders/1?x=1&request_id=abc!", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("query key: %d", w.Code)
	}
	wantProblem(t, do(srv, req{path: "/orders/1", body: `{}`}), 400, idemrt.ProblemKeyMissing)
	wantProblem(t, do(srv, req{path: "/orders/1?request_id=a&request_id=b", body: `{}`}), 400, idemrt.ProblemKeyMalformed)
}

func TestKeyFromFields(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) {
		p.Key = idemrt.KeyFromFields
		p.KeyName = ""
		p.KeyFields = []string{"order.id", "customer"}
		p.Scope = "orders"
	}), h)
	do(srv, req{body: `{"order":{"id":"o-1","total":5},"customer":42}`})
	if got, want := st.claims[0].Key, `orders:"o-1",42`; got != want {
		t.Errorf("derived key = %q, want %q", got, want)
	}
	if w := do(srv, req{body: `{"customer":42,"order":{"total":5,"id":"o-1"}}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same business ids, reordered: %d", w.Code)
	}
	// Same ids, different payload: the key is the same, the fingerprint not.
	wantProblem(t, do(srv, req{body: `{"order":{"id":"o-1","total":6},"customer":42}`}), 422, idemrt.ProblemFingerprintMismatch)
	wantProblem(t, do(srv, req{body: `{"order":{"total":6},"customer":42}`}), 400, idemrt.ProblemKeyMissing)
	wantProblem(t, do(srv, req{body: `not json`, ctype: "text/plain"}), 400, idemrt.ProblemKeyMissing)
	// Values that are not visible ASCII are hashed.
	do(srv, req{body: `{"order":{"id":"caf\u00e9 au lait"},"customer":1}`})
	last := st.claims[len(st.claims)-1].Key
	if !strings.HasPrefix(last, "orders:sha256:") || len(last) != len("orders:sha256:")+64 {
		t.Errorf("derived key for non-ASCII values = %q, want orders:sha256:<hex>", last)
	}
}

func TestKeyFromBody(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Key = idemrt.KeyFromBody; p.KeyName = "" }), h)
	do(srv, req{body: `{"a":1,"b":2}`})
	if w := do(srv, req{body: `{"b":2,"a":1}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same content: %d", w.Code)
	}
	if w := do(srv, req{body: `{"a":2}`}); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("other content must run: %d", w.Code)
	}
	if h.calls.Load() != 2 {
		t.Fatalf("calls %d", h.calls.Load())
	}
}

func TestLeaseTakeoverAndFencedCompletion(t *testing.T) {
	st := idemrt.NewMemoryStore()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	started := make(chan struct{})
	release := make(chan struct{})
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		n := h.calls.Load()
		if n == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(201)
		fmt.Fprintf(w, "run %d", n)
	}
	var fenced, takenOver int
	var hmu sync.Mutex
	srv := wrap(t, idemrt.Options{Store: st, Hooks: idemrt.Hooks{
		Fenced:    func(context.Context, idemrt.Event) { hmu.Lock(); fenced++; hmu.Unlock() },
		TakenOver: func(context.Context, idemrt.Event) { hmu.Lock(); takenOver++; hmu.Unlock() },
	}}, policy(func(p *idemrt.Policy) { p.Lease = 10 * time.Second }), h)

	slow := make(chan *httptest.ResponseRecorder)
	go func() { slow <- do(srv, req{key: "k", body: `{}`}) }()
	<-started
	advance(11 * time.Second) // the slow worker's lease ends
	second := do(srv, req{key: "k", body: `{}`})
	if second.Code != 201 || second.Body.String() != "run 2" {
		t.Fatalf("takeover run: %d %q", second.Code, second.Body)
	}
	close(release)
	first := <-slow
	// The fenced worker's client still gets its own response.
	if first.Code != 201 || first.Body.String() != "run 1" {
		t.Fatalf("fenced worker's client got %d %q, want its response", first.Code, first.Body)
	}
	// The record holds the new owner's result.
	if w := do(srv, req{key: "k", body: `{}`}); w.Body.String() != "run 2" {
		t.Fatalf("replay = %q, want the takeover's result", w.Body)
	}
	if fenced != 1 || takenOver != 1 {
		t.Fatalf("fenced %d takenOver %d, want 1 and 1", fenced, takenOver)
	}
}

func TestExpiredRecordRunsAgain(t *testing.T) {
	st := idemrt.NewMemoryStore()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { return now })
	h := &counting{}
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) { p.TTL = time.Hour }), h)
	do(srv, req{key: "k", body: `{}`})
	now = now.Add(59 * time.Minute)
	do(srv, req{key: "k", body: `{}`})
	if h.calls.Load() != 1 {
		t.Fatal("replay within the TTL ran the handler")
	}
	now = now.Add(2 * time.Minute)
	if w := do(srv, req{key: "k", body: `{"other":true}`}); w.Code != 201 || h.calls.Load() != 2 {
		t.Fatalf("after expiry: %d, calls %d; want a fresh run", w.Code, h.calls.Load())
	}
}

func TestStreamingFlush(t *testing.T) {
	var sawFlushed bool
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		// The first event reached the client before the handler ended.
		rec := w.(interface{ Unwrap() http.ResponseWriter }).Unwrap().(*httptest.ResponseRecorder)
		sawFlushed = rec.Flushed && rec.Body.String() == "data: 1\n\n"
		_, _ = io.WriteString(w, "data: 2\n\n")
	}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	w := do(srv, req{key: "k", body: `{}`})
	if !sawFlushed {
		t.Error("Flush did not stream the first event to the client")
	}
	if w.Code != 200 || w.Body.String() != "data: 1\n\ndata: 2\n\n" {
		t.Fatalf("streamed response %d %q", w.Code, w.Body)
	}
	re := do(srv, req{key: "k", body: `{}`})
	if re.Body.String() != "data: 1\n\ndata: 2\n\n" || re.Header().Get("Content-Type") != "text/event-stream" || h.calls.Load() != 1 {
		t.Fatalf("replay of a stream: %q %q calls %d; want the whole body saved", re.Body, re.Header().Get("Content-Type"), h.calls.Load())
	}
}

func TestStreamingOutsideSaveReleases(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "oops")
	}}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k", body: `{}`})
	do(srv, req{key: "k", body: `{}`})
	if h.calls.Load() != 2 {
		t.Fatalf("calls %d; a streamed 500 must release the key", h.calls.Load())
	}
}

func TestHijackRecordsTombstone(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = brw.Flush()
	}}
	ts := httptest.NewServer(wrap(t, idemrt.Options{}, policy(), h))
	defer ts.Close()
	send := func() (*http.Response, string) {
		r, _ := http.NewRequest("POST", ts.URL+"/orders/1", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := send(); resp.StatusCode != 200 || body != "hijacked" {
		t.Fatalf("hijacked response %d %q", resp.StatusCode, body)
	}
	resp, body := send()
	if resp.StatusCode != 409 || !strings.Contains(body, "result-unavailable") {
		t.Fatalf("retry after a hijack: %d %s; want 409 result-unavailable", resp.StatusCode, body)
	}
	if h.calls.Load() != 1 {
		t.Fatal("hijacking handler ran twice")
	}
}

// Against a real server: the client disconnecting does not stop the save.
func TestRealServerRoundTrip(t *testing.T) {
	h := &counting{}
	ts := httptest.NewServer(wrap(t, idemrt.Options{}, policy(), h))
	defer ts.Close()
	var bodies []string
	for i := 0; i < 2; i++ {
		r, _ := http.NewRequest("POST", ts.URL+"/orders/1", strings.NewReader(`{"a":1}`))
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || resp.ContentLength != int64(len(b)) {
			t.Fatalf("status %d content-length %d body %d bytes", resp.StatusCode, resp.ContentLength, len(b))
		}
		bodies = append(bodies, string(b))
	}
	if bodies[0] != bodies[1] || h.calls.Load() != 1 {
		t.Fatalf("bodies %q, calls %d", bodies, h.calls.Load())
	}
}
