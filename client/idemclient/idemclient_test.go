package idemclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// seen is one request the scripted server received.
type seen struct {
	key, query, body string
}

// scripted answers the i-th request with statuses[i] (200 after them),
// with Retry-After when retryAfter[i] is set, and records what it got.
type scripted struct {
	mu         sync.Mutex
	statuses   []int
	retryAfter map[int]string
	got        []seen
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := len(s.got)
	s.got = append(s.got, seen{r.Header.Get("Idempotency-Key"), r.URL.Query().Get("key"), string(b)})
	s.mu.Unlock()
	status := 200
	if i < len(s.statuses) {
		status = s.statuses[i]
	}
	if ra, ok := s.retryAfter[i]; ok {
		w.Header().Set("Retry-After", ra)
	}
	if status == 200 && i > 0 {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
}

var testPolicies = []*idemrt.Policy{
	{OperationID: "createCharge", Method: "POST", Route: "/charges", BasePaths: []string{"/v1"}, Key: idemrt.KeyFromHeader, KeyName: "Idempotency-Key"},
	{OperationID: "createOrder", Method: "POST", Route: "/orders", Key: idemrt.KeyFromQuery, KeyName: "key"},
	{OperationID: "createRefund", Method: "POST", Route: "/refunds", Key: idemrt.KeyFromFields, KeyFields: []string{"charge", "amount"}},
}

func newClient(t *testing.T, opts Options) *http.Client {
	t.Helper()
	opts.BaseDelay, opts.MaxDelay = time.Microsecond, time.Microsecond
	tr, err := New(opts, testPolicies...)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, url, body string, res *Result) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), res), "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestRetriedStatusesKeepKeyAndBytes(t *testing.T) {
	s := &scripted{statuses: []int{503, 502, 504, 500, 409}, retryAfter: map[int]string{4: "0"}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var res Result
	resp := post(t, newClient(t, Options{}), srv.URL+"/v1/charges", `{"amount":1}`, &res)
	if resp.StatusCode != 200 || res.Attempts != 6 || !res.Replayed || res.Operation != "createCharge" {
		t.Fatalf("status %d, result %+v; want 200 replayed after 6 attempts", resp.StatusCode, res)
	}
	for i, g := range s.got {
		if g.key != res.Key || g.body != `{"amount":1}` {
			t.Errorf("attempt %d sent key %q body %q, want key %q and the same body", i+1, g.key, g.body, res.Key)
		}
	}
	if len(res.Key) != 32 {
		t.Errorf("generated key %q is not 128 bits in hex", res.Key)
	}
}

func TestFinalStatusesAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 413, 422, 404, 409} {
		s := &scripted{statuses: []int{status}} // 409 without Retry-After: a tombstone
		srv := httptest.NewServer(s)
		var res Result
		resp := post(t, newClient(t, Options{}), srv.URL+"/v1/charges", `{}`, &res)
		srv.Close()
		if resp.StatusCode != status || res.Attempts != 1 || len(s.got) != 1 {
			t.Errorf("%d: got status %d after %d attempts (%d requests), want it once", status, resp.StatusCode, res.Attempts, len(s.got))
		}
	}
}

func TestCallerKeyIsKept(t *testing.T) {
	s := &scripted{statuses: []int{503}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var res Result
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), &res), "POST", srv.URL+"/v1/charges", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "mine-1")
	resp, err := newClient(t, Options{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if res.Key != "mine-1" || len(s.got) != 2 || s.got[0].key != "mine-1" || s.got[1].key != "mine-1" {
		t.Fatalf("result %+v, requests %+v; want the caller's key on both attempts", res, s.got)
	}
	if req.Header.Get("Idempotency-Key") != "mine-1" || len(req.Header) != 1 {
		t.Errorf("the caller's request was modified: %v", req.Header)
	}
}

func TestQueryKeyAndPassThrough(t *testing.T) {
	s := &scripted{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, Options{})
	var res Result
	post(t, c, srv.URL+"/orders?x=1", `{}`, &res)
	if res.Key == "" || s.got[0].query != res.Key || s.got[0].key != "" {
		t.Fatalf("result %+v, request %+v; want the generated key in ?key=", res, s.got[0])
	}
	// /charges without the /v1 base path is not the operation.
	res = Result{}
	post(t, c, srv.URL+"/charges", `{}`, &res)
	if s.got[1].key != "" || res.Attempts != 0 {
		t.Fatalf("an unmatched request got key %q (result %+v)", s.got[1].key, res)
	}
}

func TestGivesUpWithTheLastAnswer(t *testing.T) {
	s := &scripted{statuses: []int{503, 503, 503, 503}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var res Result
	resp := post(t, newClient(t, Options{MaxAttempts: 3}), srv.URL+"/v1/charges", `{}`, &res)
	if resp.StatusCode != 503 || res.Attempts != 3 || len(s.got) != 3 {
		t.Fatalf("status %d after %d attempts; want the third 503", resp.StatusCode, res.Attempts)
	}
}

func TestTransportErrorsAreRetried(t *testing.T) {
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		b, _ := io.ReadAll(r.Body)
		if string(b) != "payload" {
			t.Errorf("attempt %d sent %q", n, b)
		}
		if n < 3 {
			return nil, errors.New("connection reset by peer")
		}
		return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	tr, err := New(Options{Base: base, BaseDelay: time.Microsecond}, testPolicies...)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), &res), "POST", "http://x/v1/charges", strings.NewReader("payload"))
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 201 || res.Attempts != 3 {
		t.Fatalf("resp %v, err %v, result %+v; want 201 on the third attempt", resp, err, res)
	}
}

func TestContextStopsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		cancel()
		return nil, errors.New("refused")
	})
	tr, _ := New(Options{Base: base}, testPolicies...)
	var res Result
	req, _ := http.NewRequestWithContext(WithResult(ctx, &res), "POST", "http://x/v1/charges", nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) || res.Attempts != 1 {
		t.Fatalf("err %v after %d attempts; want context.Canceled after 1", err, res.Attempts)
	}
}

func TestBackoff(t *testing.T) {
	tr, _ := New(Options{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}, testPolicies...)
	for n := 1; n <= 8; n++ {
		ceiling := min(time.Second, 100*time.Millisecond<<(n-1))
		for range 50 {
			if d := tr.backoff(n, nil); d < 0 || d >= ceiling {
				t.Fatalf("retry %d waits %v, want [0, %v)", n, d, ceiling)
			}
		}
	}
	resp := &http.Response{Header: http.Header{"Retry-After": {"7"}}}
	if d := tr.backoff(1, resp); d != 7*time.Second {
		t.Errorf("Retry-After 7 gives %v, want 7s", d)
	}
}

// The key the client reports for a fields-keyed or body-keyed operation
// is the key the server derives (read from the server's events).
func TestDerivedKeyIsTheServers(t *testing.T) {
	policies := []*idemrt.Policy{
		{OperationID: "refund", Method: "POST", Route: "/refunds/{charge}", Principal: idemrt.PrincipalAnonymous, Key: idemrt.KeyFromFields, KeyFields: []string{"order.id", "amount"}},
		{OperationID: "sub", Method: "POST", Route: "/subs/{id}", Principal: idemrt.PrincipalAnonymous, Key: idemrt.KeyFromBody, FingerprintExclude: []string{"/note"}},
	}
	var mu sync.Mutex
	var serverKeys []string
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Hooks: idemrt.Hooks{Completed: func(_ context.Context, e idemrt.Event) {
		mu.Lock()
		serverKeys = append(serverKeys, e.Key)
		mu.Unlock()
	}}}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer srv.Close()
	tr, err := New(Options{}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: tr}
	var keys []string
	for _, u := range []string{"/refunds/ch%201", "/subs/7?x=1"} {
		var res Result
		post(t, c, srv.URL+u, `{"amount": 1.50, "order": {"id": "o-1"}, "note": "n"}`, &res)
		keys = append(keys, res.Key)
	}
	if len(serverKeys) != 2 || keys[0] != serverKeys[0] || keys[1] != serverKeys[1] {
		t.Fatalf("client keys %q, server keys %q", keys, serverKeys)
	}
	if !strings.HasPrefix(keys[0], `refund:`) {
		t.Errorf("fields key %q", keys[0])
	}
}

// A body sent with a Content-Encoding counts as raw bytes in the server's
// body key (fingerprint version 3): the key the transport reports must be
// the one the server claimed, not the key of the body read as JSON.
func TestDerivedKeyWithContentEncodingIsTheServers(t *testing.T) {
	policies := []*idemrt.Policy{{OperationID: "sub", Method: "POST", Route: "/subs", Principal: idemrt.PrincipalAnonymous, Key: idemrt.KeyFromBody}}
	var mu sync.Mutex
	var serverKeys []string
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Hooks: idemrt.Hooks{Completed: func(_ context.Context, e idemrt.Event) {
		mu.Lock()
		serverKeys = append(serverKeys, e.Key)
		mu.Unlock()
	}}}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer srv.Close()
	tr, err := New(Options{}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), &res), "POST", srv.URL+"/subs", strings.NewReader(`{"plan": "gold", "seats": 3}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "identity")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || len(serverKeys) != 1 || res.Key != serverKeys[0] {
		t.Fatalf("status %d: client key %q, server keys %q", resp.StatusCode, res.Key, serverKeys)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The caller's own key is read as the middleware reads it: a query key
// that url.Values drops (a ";" in its pair) is still the request's key, so
// the transport adds no second one (which the middleware would refuse as a
// repeated key parameter).
func TestCallerQueryKeyIsReadAsTheServerReadsIt(t *testing.T) {
	policies := []*idemrt.Policy{{OperationID: "createOrder", Method: "POST", Route: "/orders", Principal: idemrt.PrincipalAnonymous, Key: idemrt.KeyFromQuery, KeyName: "key"}}
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer srv.Close()
	tr, err := New(Options{}, policies...)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	resp := post(t, &http.Client{Transport: tr}, srv.URL+"/orders?key=a;b", `{}`, &res)
	if resp.StatusCode != 201 || res.Key != "a;b" {
		t.Fatalf("status %d, result %+v; want 201 under the caller's key a;b", resp.StatusCode, res)
	}
}
