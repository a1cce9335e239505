package runtime_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// secret is a response worth hiding: the tests look for it in what the
// store receives.
const secret = "card_fp_8f3a9c2e77"

func testKey(id string, b byte) idemrt.EncryptionKey {
	return idemrt.EncryptionKey{ID: id, Secret: bytes.Repeat([]byte{b}, 32)}
}

func ring(t testing.TB, keys ...idemrt.EncryptionKey) *idemrt.KeyRing {
	t.Helper()
	kr, err := idemrt.NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// secretHandler answers 201 with the secret in its body and Location.
func secretHandler() *counting {
	return &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/orders/"+secret)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"fingerprint":"`+secret+`"}`)
	}}
}

// recordingStore keeps every completion it is asked to write, as bytes a
// database would hold, and can alter what claims read back.
type recordingStore struct {
	idemrt.Store
	mu      sync.Mutex
	written [][]byte
	alter   func(*idemrt.ClaimResult)
}

func (s *recordingStore) Complete(ctx context.Context, c idemrt.Completion) error {
	s.keep(c)
	return s.Store.Complete(ctx, c)
}

func (s *recordingStore) keep(c idemrt.Completion) {
	if c.Response == nil {
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", c.Response.Status)
	for k, vs := range c.Response.Header {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	b.Write(c.Response.Body)
	s.mu.Lock()
	s.written = append(s.written, b.Bytes())
	s.mu.Unlock()
}

func (s *recordingStore) Claim(ctx context.Context, r idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, r)
	if err == nil && res.State == idemrt.Completed && s.alter != nil {
		s.alter(&res)
	}
	return res, err
}

// recordingTxStore is recordingStore with transactional mode.
type recordingTxStore struct {
	*recordingStore
	tx idemrt.TxStore
}

func (s *recordingTxStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	tx, err := s.tx.BeginTx(ctx)
	return &recordingTx{Tx: tx, s: s.recordingStore}, err
}

type recordingTx struct {
	idemrt.Tx
	s *recordingStore
}

func (t *recordingTx) Complete(ctx context.Context, c idemrt.Completion) error {
	t.s.keep(c)
	return t.Tx.Complete(ctx, c)
}

// wantHidden fails when any written record shows the secret, in clear or
// hex.
func wantHidden(t *testing.T, written [][]byte) {
	t.Helper()
	if len(written) == 0 {
		t.Fatal("nothing was written to the store")
	}
	for _, b := range written {
		for _, s := range []string{secret, hex.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret))} {
			if bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(s))) {
				t.Fatalf("the store holds the response in clear (%q found) in %q", s, b)
			}
		}
	}
}

func TestSealedAtRest(t *testing.T) {
	for _, transactional := range []bool{false, true} {
		t.Run(fmt.Sprintf("transactional=%v", transactional), func(t *testing.T) {
			rec := &recordingStore{Store: idemrt.NewMemoryStore()}
			var st idemrt.Store = rec
			p := policy()
			if transactional {
				st = &recordingTxStore{recordingStore: rec, tx: rec.Store.(idemrt.TxStore)}
				p = txPolicy()
			}
			h := secretHandler()
			srv := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, testKey("k1", 1))}, p, h)
			first := do(srv, req{key: "a", body: `{}`})
			if first.Code != 201 || !strings.Contains(first.Body.String(), secret) {
				t.Fatalf("first: %d %q", first.Code, first.Body)
			}
			wantHidden(t, rec.written)
			again := do(srv, req{key: "a", body: `{}`})
			if again.Header().Get("Idempotent-Replayed") != "true" || again.Code != 201 || again.Body.String() != first.Body.String() ||
				again.Header().Get("Location") != "/orders/"+secret {
				t.Fatalf("replay: %d %v %q", again.Code, again.Header(), again.Body)
			}
			if _, sealed := again.Header()[idemrt.SealedHeader]; sealed {
				t.Fatal("the replay shows the seal's marker header")
			}
			if h.calls.Load() != 1 {
				t.Fatalf("handler ran %d times", h.calls.Load())
			}
		})
	}
}

// Without Encryption the same test finds the secret: wantHidden can fail.
func TestSealedAtRestNeedsEncryption(t *testing.T) {
	rec := &recordingStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: rec}, policy(), secretHandler())
	do(srv, req{key: "a", body: `{}`})
	if len(rec.written) != 1 || !bytes.Contains(rec.written[0], []byte(secret)) {
		t.Fatalf("without encryption the record should hold the response in clear: %q", rec.written)
	}
}

func TestSealRotation(t *testing.T) {
	st := idemrt.NewMemoryStore()
	old, next := testKey("2026-01", 1), testKey("2026-02", 2)
	h := secretHandler()
	before := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, old)}, policy(), h)
	first := do(before, req{key: "a", body: `{}`})
	// Rotated: the new key seals, the old one still opens.
	rotated := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, next, old)}, policy(), h)
	if w := do(rotated, req{key: "a", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != first.Body.String() {
		t.Fatalf("replay after rotation: %d %q", w.Code, w.Body)
	}
	do(rotated, req{key: "b", body: `{}`})
	res, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createOrder", Key: "b"}, Lease: 1e9, TTL: 1e9})
	if err != nil || res.State != idemrt.Completed {
		t.Fatalf("claim b: %v %v", res.State, err)
	}
	if id, ok := idemrt.SealedKeyID(res.Response); !ok || id != "2026-02" {
		t.Fatalf("record b sealed with %q %v, want the ring's first key", id, ok)
	}
	// The old key retired too early: its records fail closed.
	retired := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, next)}, policy(), h)
	w := do(retired, req{key: "a", body: `{}`})
	p := wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
	if !strings.Contains(p.Detail, "encryption keys") {
		t.Errorf("detail %q does not say why", p.Detail)
	}
	if w := do(retired, req{key: "b", body: `{}`}); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("record of the remaining key: %d", w.Code)
	}
	if h.calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (a and b once each)", h.calls.Load())
	}
}

// A ciphertext that was altered, or moved to another record, or whose
// clear status was changed, is refused with 503 and the handler does not
// run again.
func TestSealRefusesTamperedAndMoved(t *testing.T) {
	var stash *idemrt.SavedResponse
	cases := []struct {
		name  string
		alter func(*idemrt.ClaimResult)
	}{
		{"flipped byte", func(r *idemrt.ClaimResult) {
			b := bytes.Clone(r.Response.Body)
			b[len(b)-20] ^= 1
			r.Response = &idemrt.SavedResponse{Status: r.Response.Status, Header: r.Response.Header, Body: b}
		}},
		{"status changed", func(r *idemrt.ClaimResult) {
			r.Response = &idemrt.SavedResponse{Status: 200, Header: r.Response.Header, Body: r.Response.Body}
		}},
		{"other epoch", func(r *idemrt.ClaimResult) { r.Epoch++ }},
		{"moved from another key", func(r *idemrt.ClaimResult) { r.Response = stash }},
		{"key id rewritten", func(r *idemrt.ClaimResult) {
			b := bytes.Clone(r.Response.Body)
			b[2] = 'x' // "k1" -> "x1", not in the ring
			r.Response = &idemrt.SavedResponse{Status: r.Response.Status, Header: r.Response.Header, Body: b}
		}},
		{"truncated", func(r *idemrt.ClaimResult) {
			r.Response = &idemrt.SavedResponse{Status: r.Response.Status, Header: r.Response.Header, Body: r.Response.Body[:3]}
		}},
		{"marker dropped", func(r *idemrt.ClaimResult) {
			r.Response = &idemrt.SavedResponse{Status: r.Response.Status, Header: http.Header{}, Body: r.Response.Body}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingStore{Store: idemrt.NewMemoryStore()}
			h := secretHandler()
			var errs []error
			hooks := idemrt.Hooks{StoreError: func(_ context.Context, ev idemrt.Event) { errs = append(errs, ev.Err) }}
			srv := wrap(t, idemrt.Options{Store: rec, Encryption: ring(t, testKey("k1", 1)), Hooks: hooks}, policy(), h)
			do(srv, req{key: "other", body: `{}`})
			res, _ := rec.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createOrder", Key: "other"}})
			stash = res.Response
			do(srv, req{key: "a", body: `{}`})
			if w := do(srv, req{key: "a", body: `{}`}); w.Code != 201 {
				t.Fatalf("untouched replay: %d", w.Code)
			}
			rec.alter = tc.alter
			w := do(srv, req{key: "a", body: `{}`})
			wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
			if strings.Contains(w.Body.String(), secret) {
				t.Fatal("the refusal shows the response")
			}
			if h.calls.Load() != 2 {
				t.Fatalf("handler ran %d times, want 2", h.calls.Load())
			}
			if len(errs) != 1 || !(errors.Is(errs[0], idemrt.ErrSealBroken) || errors.Is(errs[0], idemrt.ErrKeyNotInRing) || errors.Is(errs[0], idemrt.ErrNotSealed)) {
				t.Fatalf("StoreError events %v", errs)
			}
		})
	}
}

// A sealed record read by a middleware without a ring, and a record in
// clear read by one with a ring, fail closed; ReplayPlaintext lets the
// latter through.
func TestSealMixedModes(t *testing.T) {
	st := idemrt.NewMemoryStore()
	h := secretHandler()
	sealedSrv := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, testKey("k1", 1))}, policy(), h)
	plainSrv := wrap(t, idemrt.Options{Store: st}, policy(), h)
	do(sealedSrv, req{key: "sealed", body: `{}`})
	do(plainSrv, req{key: "plain", body: `{}`})
	wantProblem(t, do(plainSrv, req{key: "sealed", body: `{}`}), http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
	wantProblem(t, do(sealedSrv, req{key: "plain", body: `{}`}), http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
	migrating := wrap(t, idemrt.Options{Store: st, Encryption: ring(t, testKey("k1", 1)), ReplayPlaintext: true}, policy(), h)
	for _, k := range []string{"sealed", "plain"} {
		if w := do(migrating, req{key: k, body: `{}`}); w.Code != 201 || !strings.Contains(w.Body.String(), secret) {
			t.Fatalf("%s with ReplayPlaintext: %d %q", k, w.Code, w.Body)
		}
	}
	if h.calls.Load() != 2 {
		t.Fatalf("handler ran %d times", h.calls.Load())
	}
}

// Principals are bound too: the same key of two callers are two records.
func TestSealBindsPrincipal(t *testing.T) {
	kr := ring(t, testKey("k1", 1))
	a := idemrt.RecordKey{Scope: "s", PrincipalHash: idemrt.HashPrincipal("alice"), Key: "k"}
	b := idemrt.RecordKey{Scope: "s", PrincipalHash: idemrt.HashPrincipal("bob"), Key: "k"}
	sealed, err := kr.Seal(a, 7, &idemrt.SavedResponse{Status: 200, Body: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Open(b, 7, sealed); !errors.Is(err, idemrt.ErrSealBroken) {
		t.Fatalf("opened under another principal: %v", err)
	}
	if _, err := kr.Open(idemrt.RecordKey{Scope: "t", PrincipalHash: a.PrincipalHash, Key: "k"}, 7, sealed); !errors.Is(err, idemrt.ErrSealBroken) {
		t.Fatalf("opened under another scope: %v", err)
	}
	got, err := kr.Open(a, 7, sealed)
	if err != nil || string(got.Body) != secret || got.Status != 200 || len(got.Header) != 0 {
		t.Fatalf("open: %+v %v", got, err)
	}
}

func TestParseKeyRing(t *testing.T) {
	k32 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	k16 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	good := "# rotated 2026-02\n\nnew:" + k32 + "\nold:" + strings.TrimRight(k32, "=") + "\n"
	kr, err := idemrt.ParseKeyRing([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kr.IDs(), ","); got != "new,old" {
		t.Fatalf("ids %q", got)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "# nothing\n", "no key"},
		{"no colon", "a:" + k32 + "\n" + k32 + "\n", "line 2: want KEYID:BASE64"},
		{"short key", "a:" + k16 + "\n", "line 1: key \"a\" has 16 bytes, want 32"},
		{"duplicate", "a:" + k32 + "\nb:" + k32 + "\na:" + k32 + "\n", "line 3: key id \"a\" appears twice"},
		{"bad base64", "a:" + k32[:10] + "!!\n", "line 1: the key is not valid base64"},
		{"bad id", "a b:" + k32 + "\n", "line 1: key id \"a b\" has a character"},
		{"empty id", ":" + k32 + "\n", "line 1: key id must be 1 to 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idemrt.ParseKeyRing([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), k32[:10]) || strings.Contains(err.Error(), k16[:10]) {
				t.Fatalf("error shows key material: %v", err)
			}
		})
	}
	if _, err := idemrt.NewKeyRing(); err == nil {
		t.Fatal("an empty ring was accepted")
	}
}

// A sealed record keeps every header value and a body of any bytes.
func TestSealRoundTrip(t *testing.T) {
	kr := ring(t, testKey("k1", 1))
	rk := idemrt.RecordKey{Scope: "s", Key: "k"}
	body := make([]byte, 70000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, resp := range []*idemrt.SavedResponse{
		{Status: 204},
		{Status: 201, Header: http.Header{"Link": {"<a>", "<b>"}, "Location": {""}}, Body: body},
	} {
		s, err := kr.Seal(rk, 1, resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := kr.Open(rk, 1, s)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != resp.Status || !bytes.Equal(got.Body, resp.Body) || fmt.Sprint(got.Header) != fmt.Sprint(http.Header(resp.Header)) && !(len(got.Header) == 0 && len(resp.Header) == 0) {
			t.Fatalf("round trip: %d %v %d bytes, want %d %v %d bytes", got.Status, got.Header, len(got.Body), resp.Status, resp.Header, len(resp.Body))
		}
	}
}
