package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// CONTRACT §3, row 1 and 2: the first request runs the handler and its
// result is saved; the same key and fingerprint replays it.
func TestFirstRequestThenReplay(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.ReplayHeaders = []string{"x-request-count", "Set-Cookie"} }), h)
	first := do(srv, req{key: "k1", body: `{"a":1}`})
	if first.Code != http.StatusCreated {
		t.Fatalf("first status = %d, want 201", first.Code)
	}
	if first.Header().Get("Set-Cookie") != "session=secret" || first.Header().Get("X-Private") == "" {
		t.Error("the first response lost the handler's own headers")
	}
	if first.Header().Get("Idempotent-Replayed") != "" {
		t.Error("the first response says it is a replay")
	}
	second := do(srv, req{key: "k1", body: `{"a":1}`})
	if h.calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.calls.Load())
	}
	if second.Code != http.StatusCreated || !bytes.Equal(second.Body.Bytes(), first.Body.Bytes()) {
		t.Fatalf("replay = %d %q, want %d %q", second.Code, second.Body, first.Code, first.Body)
	}
	if got := second.Header().Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("Idempotent-Replayed = %q, want true", got)
	}
	for _, name := range []string{"Content-Type", "Location", "Etag", "X-Request-Count"} {
		if got, want := second.Header().Get(name), first.Header().Get(name); got != want {
			t.Errorf("replayed %s = %q, want %q", name, got, want)
		}
	}
	if got := second.Header().Values("Link"); len(got) != 2 || got[0] != `</a>; rel="next"` || got[1] != `</b>; rel="prev"` {
		t.Errorf("replayed Link = %q, want both values in order", got)
	}
	for _, name := range []string{"Set-Cookie", "X-Private"} {
		if got := second.Header().Get(name); got != "" {
			t.Errorf("%s replayed (%q), must not be", name, got)
		}
	}
}

func TestReplayIgnoresJSONKeyOrderAndWhitespace(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k", body: `{"amount":1000,"currency":"eur","meta":{"b":2,"a":[1,2.50]}}`})
	// Numbers keep their text (version 3: encoding/json tells 1e3 from
	// 1000); member order, whitespace and string escapes do not count.
	w := do(srv, req{key: "k", body: "{ \"meta\" : {\"a\":[1, 2.50], \"b\":2}, \"currency\":\"\\u0065ur\",\n\"amount\":1000 }", ctype: "application/json; charset=utf-8"})
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" || h.calls.Load() != 1 {
		t.Fatalf("semantically equal JSON: status %d replayed %q calls %d; want a replay", w.Code, w.Header().Get("Idempotent-Replayed"), h.calls.Load())
	}
}

// Row 3: key missing or malformed -> 400.
func TestKeyMissingOrMalformed(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	wantProblem(t, do(srv, req{body: `{}`}), 400, idemrt.ProblemKeyMissing)
	for name, key := range map[string]string{
		"space":       "a b",
		"too long":    strings.Repeat("k", 256),
		"non-ascii":   "caf\u00e9",
		"bad quote":   `"abc`,
		"control":     "a\x01b",
		"empty quote": `""`,
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, do(srv, req{key: key, body: `{}`}), 400, idemrt.ProblemKeyMalformed)
		})
	}
	r := httptest.NewRequest("POST", "/orders/1", strings.NewReader("{}"))
	r.Header["Idempotency-Key"] = []string{"a", "b"}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	wantProblem(t, w, 400, idemrt.ProblemKeyMalformed)
	if h.calls.Load() != 0 {
		t.Fatalf("handler ran %d times for bad keys", h.calls.Load())
	}
	// 255 characters and the RFC 8941 quoted form are fine; quoted and bare
	// name the same key.
	long := strings.Repeat("k", 255)
	if w := do(srv, req{key: long, body: `{}`}); w.Code != 201 {
		t.Errorf("255-character key: status %d", w.Code)
	}
	do(srv, req{key: "abc", body: `{}`})
	if w := do(srv, req{key: `"abc"`, body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf(`quoted "abc" did not replay abc: %d`, w.Code)
	}
}

func TestOptionalKeyRunsUnprotected(t *testing.T) {
	h := &counting{}
	st := idemrt.NewMemoryStore()
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) { p.Optional = true }), h)
	for i := 0; i < 3; i++ {
		if w := do(srv, req{body: `{}`}); w.Code != 201 {
			t.Fatalf("status %d", w.Code)
		}
	}
	if h.calls.Load() != 3 || st.Len() != 0 {
		t.Fatalf("calls %d records %d; want 3 unprotected runs", h.calls.Load(), st.Len())
	}
	// A malformed key is still refused.
	wantProblem(t, do(srv, req{key: "a b", body: `{}`}), 400, idemrt.ProblemKeyMalformed)
}

// Row 4: body over max-request-bytes -> 413, nothing claimed.
func TestRequestTooLarge(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) { p.MaxRequestBytes = 10 }), h)
	wantProblem(t, do(srv, req{key: "k", body: `{"a":"0123456789"}`}), 413, idemrt.ProblemRequestTooLarge)
	// Unknown length (chunked): read up to the cap, then refused.
	r := httptest.NewRequest("POST", "/orders/1", io.MultiReader(strings.NewReader(`{"a":`), strings.NewReader(`"0123456789"}`)))
	r.ContentLength = -1
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	wantProblem(t, w, 413, idemrt.ProblemRequestTooLarge)
	if len(st.claims) != 0 || h.calls.Load() != 0 {
		t.Fatalf("claims %d calls %d after 413; want none", len(st.claims), h.calls.Load())
	}
	// Exactly at the cap is fine.
	if w := do(srv, req{key: "k", body: `{"a":"12"}`}); w.Code != 201 {
		t.Fatalf("body at the cap: status %d", w.Code)
	}
}

// Row 5: same key, different fingerprint -> 422.
func TestFingerprintMismatch(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k", body: `{"amount":1}`})
	wantProblem(t, do(srv, req{key: "k", body: `{"amount":2}`}), 422, idemrt.ProblemFingerprintMismatch)
	// Path parameters count.
	wantProblem(t, do(srv, req{key: "k", path: "/orders/2", body: `{"amount":1}`}), 422, idemrt.ProblemFingerprintMismatch)
	if h.calls.Load() != 1 {
		t.Fatalf("handler ran %d times", h.calls.Load())
	}
}

func TestFingerprintIncludeExclude(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.FingerprintExclude = []string{"/sent_at", "/meta/trace"} }), h)
	do(srv, req{key: "k", body: `{"amount":1,"sent_at":"10:00","meta":{"trace":"x","tenant":"t"}}`})
	if w := do(srv, req{key: "k", body: `{"amount":1,"sent_at":"10:05","meta":{"trace":"y","tenant":"t"}}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("excluded fields changed: status %d, want a replay", w.Code)
	}
	wantProblem(t, do(srv, req{key: "k", body: `{"amount":1,"sent_at":"10:00","meta":{"trace":"x","tenant":"u"}}`}), 422, idemrt.ProblemFingerprintMismatch)

	srv = wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.FingerprintInclude = []string{"/amount"} }), h)
	do(srv, req{key: "k", body: `{"amount":1,"note":"a"}`})
	if w := do(srv, req{key: "k", body: `{"note":"b", "amount":1}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("only /amount counts: status %d, want a replay", w.Code)
	}
	wantProblem(t, do(srv, req{key: "k", body: `{"amount":2,"note":"a"}`}), 422, idemrt.ProblemFingerprintMismatch)
	wantProblem(t, do(srv, req{key: "k", body: `{"amount":1.0,"note":"a"}`}), 422, idemrt.ProblemFingerprintMismatch)
	wantProblem(t, do(srv, req{key: "k", body: `{"note":"a"}`}), 422, idemrt.ProblemFingerprintMismatch)
}

// Row 6: same key still in progress -> 409 with Retry-After.
func TestInProgressConflict(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "done")
	}}
	var conflicts int
	srv := wrap(t, idemrt.Options{Hooks: idemrt.Hooks{Conflict: func(context.Context, idemrt.Event) { conflicts++ }}},
		policy(func(p *idemrt.Policy) { p.Lease = 30 * time.Second }), h)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(srv, req{key: "k", body: `{}`}) }()
	<-started
	w := do(srv, req{key: "k", body: `{}`})
	wantProblem(t, w, 409, idemrt.ProblemInProgress)
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q, want a positive number of seconds", ra)
	} else if ra != "30" && ra != "29" {
		t.Errorf("Retry-After = %q, want the remaining lease (30, rounded up)", ra)
	}
	if conflicts != 1 {
		t.Errorf("Conflict hook called %d times, want 1", conflicts)
	}
	close(release)
	if first := <-done; first.Code != 201 || first.Body.String() != "done" {
		t.Fatalf("first = %d %q", first.Code, first.Body)
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 || w.Body.String() != "done" || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after completion: %d %q, want the replay", w.Code, w.Body)
	}
}

func TestWaitModeReplaysInProgressResult(t *testing.T) {
	started := make(chan struct{})
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(150 * time.Millisecond)
		w.WriteHeader(202)
		_, _ = io.WriteString(w, "accepted")
	}}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Wait = 5 * time.Second }), h)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(srv, req{key: "k", body: `{}`}) }()
	<-started
	w := do(srv, req{key: "k", body: `{}`})
	if w.Code != 202 || w.Body.String() != "accepted" || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("waiting duplicate got %d %q, want the replayed 202", w.Code, w.Body)
	}
	<-done
	if h.calls.Load() != 1 {
		t.Fatalf("handler ran %d times", h.calls.Load())
	}
}

func TestWaitModeGivesUpWith409(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Wait = 100 * time.Millisecond }), h)
	done := make(chan struct{})
	go func() { do(srv, req{key: "k", body: `{}`}); close(done) }()
	<-started
	t0 := time.Now()
	wantProblem(t, do(srv, req{key: "k", body: `{}`}), 409, idemrt.ProblemInProgress)
	if el := time.Since(t0); el < 90*time.Millisecond {
		t.Errorf("gave up after %v, want about the 100ms wait", el)
	}
	close(release)
	<-done
}

func TestWaitModeRunsWhenOwnerReleases(t *testing.T) {
	started := make(chan struct{})
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 1 {
			close(started)
			time.Sleep(50 * time.Millisecond)
			w.WriteHeader(503) // outside save: released
			return
		}
		w.WriteHeader(201)
	}
	srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Wait = 2 * time.Second }), h)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(srv, req{key: "k", body: `{}`}) }()
	<-started
	w := do(srv, req{key: "k", body: `{}`})
	if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("waiter after a release: %d replayed=%q, want its own run (201)", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if first := <-done; first.Code != 503 {
		t.Fatalf("first = %d", first.Code)
	}
}

// Row 7: result too large -> tombstone; a retry gets 409, the handler does
// not run again.
func TestTombstone(t *testing.T) {
	big := strings.Repeat("x", 100)
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		for i := 0; i < 3; i++ {
			_, _ = io.WriteString(w, big)
		}
	}}
	var unavailable int
	srv := wrap(t, idemrt.Options{Hooks: idemrt.Hooks{Unavailable: func(context.Context, idemrt.Event) { unavailable++ }}},
		policy(func(p *idemrt.Policy) { p.MaxResponseBytes = 150 }), h)
	w := do(srv, req{key: "k", body: `{}`})
	if w.Code != 200 || w.Body.String() != big+big+big {
		t.Fatalf("first: %d, %d bytes; want the whole 300-byte response", w.Code, w.Body.Len())
	}
	p := wantProblem(t, do(srv, req{key: "k", body: `{}`}), 409, idemrt.ProblemResultUnavailable)
	if !strings.Contains(p.Detail, "too large") {
		t.Errorf("detail %q does not say the result was too large", p.Detail)
	}
	if h.calls.Load() != 1 || unavailable != 1 {
		t.Fatalf("calls %d unavailable hooks %d", h.calls.Load(), unavailable)
	}
	// A mismatching retry still gets 422, not the tombstone.
	wantProblem(t, do(srv, req{key: "k", body: `{"x":1}`}), 422, idemrt.ProblemFingerprintMismatch)
}

// Row 8: store failure -> 503, handler not run.
func TestStoreFailureFailsClosed(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore(), claimErr: errDown}
	var storeErrs []error
	inner := wrap(t, idemrt.Options{Store: st, Hooks: idemrt.Hooks{StoreError: func(_ context.Context, e idemrt.Event) { storeErrs = append(storeErrs, e.Err) }}}, policy(), h)
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "outer")
		inner.ServeHTTP(w, r)
	})
	w := do(srv, req{key: "k", body: `{}`})
	wantProblem(t, w, 503, idemrt.ProblemStoreUnavailable)
	if w.Header().Get("X-Request-Id") != "outer" {
		t.Error("the 503 lost the outer middleware's header")
	}
	if w.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if h.calls.Load() != 0 {
		t.Fatal("handler ran although the store failed")
	}
	if len(storeErrs) != 1 || !errors.Is(storeErrs[0], errDown) {
		t.Errorf("StoreError hook got %v", storeErrs)
	}
}

// §4: saving fails after the handler ran -> the client still gets its
// response; the record stays in progress until its lease ends.
func TestCompleteFailureStillResponds(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore(), completeErr: errDown}
	srv := wrap(t, idemrt.Options{Store: st}, policy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 {
		t.Fatalf("status %d, want the handler's 201", w.Code)
	}
	st.completeErr = nil
	wantProblem(t, do(srv, req{key: "k", body: `{}`}), 409, idemrt.ProblemInProgress)
}

func TestSaveRules(t *testing.T) {
	for _, tc := range []struct {
		status int
		save   idemrt.SaveRule
		saved  bool
	}{
		{200, idemrt.SaveRule{}, true},
		{201, idemrt.SaveRule{}, true},
		{404, idemrt.SaveRule{}, false},
		{405, idemrt.SaveRule{}, false},
		{404, idemrt.SaveRule{Classes: idemrt.Class4xx, Codes: []int{404}}, true},
		{405, idemrt.SaveRule{Classes: idemrt.Class2xx, Codes: []int{405}}, true},
		{400, idemrt.SaveRule{}, true},
		{422, idemrt.SaveRule{}, true},
		{408, idemrt.SaveRule{}, false},
		{409, idemrt.SaveRule{}, false},
		{425, idemrt.SaveRule{}, false},
		{429, idemrt.SaveRule{}, false},
		{500, idemrt.SaveRule{}, false},
		{503, idemrt.SaveRule{}, false},
		{302, idemrt.SaveRule{}, false},
		{500, idemrt.SaveRule{Classes: idemrt.Class2xx | idemrt.Class4xx | idemrt.Class5xx}, true},
		{429, idemrt.SaveRule{Classes: idemrt.Class4xx, Codes: []int{429}}, true},
		{404, idemrt.SaveRule{Classes: idemrt.Class2xx}, false},
	} {
		h := &counting{fn: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) }}
		srv := wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) { p.Save = tc.save }), h)
		do(srv, req{key: "k", body: `{}`})
		w := do(srv, req{key: "k", body: `{}`})
		if w.Code != tc.status {
			t.Errorf("status %d save %+v: second response %d", tc.status, tc.save, w.Code)
		}
		replayed := w.Header().Get("Idempotent-Replayed") == "true"
		if replayed != tc.saved || (h.calls.Load() == 1) != tc.saved {
			t.Errorf("status %d save %+v: replayed=%v calls=%d, want saved=%v", tc.status, tc.save, replayed, h.calls.Load(), tc.saved)
		}
	}
}

func TestPanicReleasesThenRepanics(t *testing.T) {
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 1 {
			panic("boom")
		}
		w.WriteHeader(201)
	}
	var released int
	srv := wrap(t, idemrt.Options{Hooks: idemrt.Hooks{Released: func(context.Context, idemrt.Event) { released++ }}}, policy(), h)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the handler's panic to go on", p)
			}
		}()
		do(srv, req{key: "k", body: `{}`})
	}()
	if released != 1 {
		t.Fatalf("released %d times, want 1", released)
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 || h.calls.Load() != 2 {
		t.Fatalf("after the panic: %d, calls %d; want the key free to run again", w.Code, h.calls.Load())
	}
}

func TestHandlerWithoutWriteSavesEmpty200(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {}}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("first %d %q", w.Code, w.Body)
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 200 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second %d", w.Code)
	}
}

func TestContentTypeSniffedAndReplayed(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html><body>hi</body></html>") }}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	first := do(srv, req{key: "k", body: `{}`})
	second := do(srv, req{key: "k", body: `{}`})
	if ct := first.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || second.Header().Get("Content-Type") != ct {
		t.Fatalf("Content-Type first %q replay %q", ct, second.Header().Get("Content-Type"))
	}
}

func TestHandlerReadsBody(t *testing.T) {
	var got string
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
	}}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k", body: `{"hello":"world"}`})
	if got != `{"hello":"world"}` {
		t.Fatalf("handler read %q", got)
	}
}

func TestInvalidStatusReleases(t *testing.T) {
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 1 {
			w.WriteHeader(42)
		}
		w.WriteHeader(201)
	}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "invalid WriteHeader code 42") {
				t.Fatalf("recovered %v", p)
			}
		}()
		do(srv, req{key: "k", body: `{}`})
	}()
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 {
		t.Fatalf("after an invalid status: %d, want the key released and run again", w.Code)
	}
}

func TestHeadAndNoContentHaveNoBody(t *testing.T) {
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(204)
		_, _ = io.WriteString(w, "ignored")
	}}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	for i := 0; i < 2; i++ {
		if w := do(srv, req{key: "k", body: `{}`}); w.Code != 204 || w.Body.Len() != 0 {
			t.Fatalf("run %d: %d %q", i, w.Code, w.Body)
		}
	}
}

// Code after the middleware that writes into a replayed header's values
// must not change the saved response.
func TestReplayHeadersAreCopies(t *testing.T) {
	h := &counting{}
	inner := wrap(t, idemrt.Options{}, policy(), h)
	mutating := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		if vs := rec.Header()["Location"]; len(vs) > 0 {
			vs[0] = "/tampered"
		}
		rec.Header()["Link"] = append(rec.Header()["Link"], "<x>; rel=extra")
		w.WriteHeader(rec.Code)
	})
	do(mutating, req{key: "k", body: `{}`})
	do(mutating, req{key: "k", body: `{}`})
	w := do(inner, req{key: "k", body: `{}`})
	if got := w.Header().Get("Location"); got != "/orders/42" {
		t.Fatalf("saved Location changed to %q", got)
	}
	if got := w.Header().Values("Link"); len(got) != 2 {
		t.Fatalf("saved Link changed to %q", got)
	}
}
