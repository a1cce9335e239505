package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// FuzzServe sends arbitrary paths, keys, content types and bodies through
// a middleware with every key source: nothing panics, and every answer is
// one the contract lists.
func FuzzServe(f *testing.F) {
	f.Add("/v1/orders/1", "k", "application/json", []byte(`{"order":{"id":"a"},"x":[1,2]}`), uint8(0))
	f.Add("/v1/orders/%zz", `"q"`, "application/x-www-form-urlencoded", []byte("a=1&b=%"), uint8(1))
	f.Add("/v1/files/a.b", "", "text/plain", []byte{0xff, 0}, uint8(2))
	f.Add("/v1/orders/1?key=a&key=b", "a b", "application/merge-patch+json", []byte(`{"a":1,"a":2}`), uint8(3))
	mk := func(src idemrt.KeySource, mod func(p *idemrt.Policy)) *idemrt.Policy {
		p := &idemrt.Policy{OperationID: "op", Method: "POST", Route: "/orders/{id}", BasePaths: []string{"/v1"}, Key: src, Principal: idemrt.PrincipalAnonymous, MaxRequestBytes: 1 << 12, MaxResponseBytes: 64}
		switch src {
		case idemrt.KeyFromQuery:
			p.KeyName = "key"
		case idemrt.KeyFromFields:
			p.KeyFields = []string{"order.id", "x.1"}
		}
		if mod != nil {
			mod(p)
		}
		return p
	}
	var handlers []http.Handler
	for _, p := range []*idemrt.Policy{
		mk(idemrt.KeyFromHeader, func(p *idemrt.Policy) { p.FingerprintExclude = []string{"/x/0", "/order"} }),
		mk(idemrt.KeyFromQuery, func(p *idemrt.Policy) { p.Optional = true }),
		mk(idemrt.KeyFromFields, func(p *idemrt.Policy) { p.FingerprintInclude = []string{"/x", "/order/id", "/missing"} }),
		mk(idemrt.KeyFromBody, nil),
	} {
		mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, p)
		if err != nil {
			f.Fatal(err)
		}
		handlers = append(handlers, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(201)
			_, _ = w.Write(bytes.Repeat(b, 2))
		})))
	}
	allowed := map[int]bool{200: true, 201: true, 400: true, 404: true, 409: true, 413: true, 422: true}
	f.Fuzz(func(t *testing.T, path, key, ctype string, body []byte, which uint8) {
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return
		}
		r := &http.Request{Method: "POST", URL: u, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		r = r.WithContext(context.Background())
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Idempotency-Key", key)
		for i := 0; i < 2; i++ {
			r.Body = io.NopCloser(bytes.NewReader(body))
			w := httptest.NewRecorder()
			handlers[int(which)%len(handlers)].ServeHTTP(w, r)
			if !allowed[w.Code] {
				t.Fatalf("status %d for %q key %q body %q", w.Code, path, key, body)
			}
		}
	})
}

func TestLoggerAndHooksOnTakeover(t *testing.T) {
	var buf bytes.Buffer
	st := idemrt.NewMemoryStore()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { return now })
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []string
	hooks := idemrt.Hooks{
		Replayed:  func(_ context.Context, e idemrt.Event) { events = append(events, "replayed:"+e.Key) },
		TakenOver: func(_ context.Context, e idemrt.Event) { events = append(events, "takenover") },
		Completed: func(_ context.Context, e idemrt.Event) { events = append(events, "completed") },
		Released:  func(_ context.Context, e idemrt.Event) { events = append(events, "released") },
		Mismatch:  func(_ context.Context, e idemrt.Event) { events = append(events, "mismatch") },
	}
	// Claim directly to leave an in-progress record whose lease then ends.
	res, _ := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createOrder", Key: "k"}, Lease: time.Second, TTL: time.Hour})
	if res.State != idemrt.Acquired {
		t.Fatal(res.State)
	}
	now = now.Add(2 * time.Second)
	srv := wrap(t, idemrt.Options{Store: st, Logger: logger, Hooks: hooks}, policy(), &counting{})
	do(srv, req{key: "k", body: `{}`})
	do(srv, req{key: "k", body: `{}`})
	do(srv, req{key: "k", body: `{"other":1}`})
	got := strings.Join(events, ",")
	if got != "takenover,completed,replayed:k,mismatch" {
		t.Fatalf("events %s", got)
	}
	// The takeover's epoch is the fresh record's plus one.
	takeoverEpoch := fmt.Sprintf("epoch=%d", res.Epoch+1)
	for _, want := range []string{"took over a record whose lease ended", "replayed", "operation=createOrder", "key_hash=" + idemrt.KeyDigest("k"), takeoverEpoch} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
}
