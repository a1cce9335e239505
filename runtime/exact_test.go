package runtime_test

import (
	"bytes"
	"context"
	"net/http"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Integers beyond 2^53 are exact: a reused key with the neighbouring
// amount is a mismatch, not a replay; and so is the same amount written
// another way (version 3: encoding/json refuses 9007199254740993.0 for an
// integer field).
func TestBigIntegersDoNotMerge(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	if w := do(srv, req{key: "k1", body: `{"amount":9007199254740993}`}); w.Code != http.StatusCreated {
		t.Fatalf("first: %d", w.Code)
	}
	wantProblem(t, do(srv, req{key: "k1", body: `{"amount":9007199254740992}`}), 422, idemrt.ProblemFingerprintMismatch)
	wantProblem(t, do(srv, req{key: "k1", body: `{"amount":9007199254740993.0}`}), 422, idemrt.ProblemFingerprintMismatch)
	if w := do(srv, req{key: "k1", body: ` {"amount": 9007199254740993}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same amount, respaced: %d, want a replay", w.Code)
	}
}

// Fields keys over ids beyond 2^53 are distinct keys.
func TestFieldsKeysOfBigIdsDiffer(t *testing.T) {
	h := &counting{}
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st}, policy(func(p *idemrt.Policy) {
		p.Key, p.KeyName, p.KeyFields, p.Scope = idemrt.KeyFromFields, "", []string{"id"}, "orders"
	}), h)
	a := do(srv, req{body: `{"id":1234567890123456789}`})
	b := do(srv, req{body: `{"id":1234567890123456788}`})
	if a.Code != http.StatusCreated || b.Code != http.StatusCreated || b.Header().Get("Idempotent-Replayed") != "" || h.calls.Load() != 2 {
		t.Fatalf("two ids: %d, %d (replayed %q), %d runs; want two runs", a.Code, b.Code, b.Header().Get("Idempotent-Replayed"), h.calls.Load())
	}
	if got := st.claims[0].Key; got != "orders:1234567890123456789" {
		t.Errorf("key %q, want orders:1234567890123456789", got)
	}
	// Ordinary values keep the key they had under version 1.
	for body, want := range map[string]string{
		`{"id":42}`: "orders:42", `{"id":1.50}`: "orders:1.5", `{"id":1e21}`: "orders:1e+21", `{"id":"o-1"}`: `orders:"o-1"`,
		`{"id":-0}`: "orders:0", `{"id":0.1}`: "orders:0.1", `{"id":9007199254740992}`: "orders:9007199254740992",
	} {
		if got, ok := idemrt.FieldsKey("orders", []byte(body), "id"); !ok || got != want {
			t.Errorf("key of %s = %q, want %q", body, got, want)
		}
	}
}

// Under version 2, two JSON numbers fingerprint alike exactly when they
// denote the same decimal value, at any length and exponent (the fields
// key's rule still); under version 3, exactly when they are the same text.
func TestExactNumbers(t *testing.T) {
	fp := func(num string) [32]byte {
		f, err := idemrt.FingerprintAt(2, "POST", "/x", nil, "application/json", []byte(`{"n":`+num+`}`), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	groups := [][]string{
		{"1000", "1000.0", "1e3", "1E+3", "10e2", "0.1e4", "1000000e-3", "100000000000000000000000000e-23"},
		{"1001"},
		{"0", "-0", "0.0", "-0.0e-5", "0e999999999"},
		{"9007199254740993", "9007199254740993.000"},
		{"9007199254740992"},
		{"12345678901234567890", "1.2345678901234567890e19"},
		{"12345678901234567891"},
		{"1e999999999", "10e999999998", "0.01e1000000001"},
		{"1e999999998"},
		{"-1e999999999"},
		{"1e-999999999"},
		{"1e100000000000000000000", "10e99999999999999999999", "0.1e100000000000000000001"},
		{"1e100000000000000000001"},
		{"1e-100000000000000000000", "0.001e-99999999999999999997"},
		{"0.1", "1e-1"},
		{"0.1000000000000000055511151231257827"},
		{"1e-400"},
		// Exponents beyond int64: the carry and borrow of the decimal
		// arithmetic on the exponent's digits.
		{"15e999999999999999999999", "1.5e1000000000000000000000", "150E+999999999999999999998"},
		{"15e-1000000000000000000000", "1.5e-999999999999999999999", "1.5E-0999999999999999999999"},
		{"0.0015e-1000000000000000000000", "1.5e-1000000000000000000003", "15e-1000000000000000000004"},
	}
	seen := map[[32]byte]string{}
	for _, g := range groups {
		want := fp(g[0])
		for _, n := range g[1:] {
			if fp(n) != want {
				t.Errorf("%s and %s are equal numbers with different fingerprints", g[0], n)
			}
		}
		if prev, ok := seen[want]; ok {
			t.Errorf("%s and %s are different numbers with one fingerprint", prev, g[0])
		}
		seen[want] = g[0]
	}
	seen3 := map[[32]byte]string{}
	for _, g := range groups {
		for _, n := range g {
			f, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", []byte(`{"n":`+n+`}`), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen3[f]; ok {
				t.Errorf("version 3: %s and %s share a fingerprint", prev, n)
			}
			seen3[f] = n
		}
	}
}

// The exact text, pinned for the layouts and the exponent arithmetic.
func TestExactNumberText(t *testing.T) {
	for in, want := range map[string]string{
		"9007199254740993": "9007199254740993", "123456789012345678901": "123456789012345678901",
		"1234567890123456789012": "1.234567890123456789012e+21", "0.000001": "0.000001", "0.0000001": "1e-7",
		"-1.50e-7": "-1.5e-7", "-0.0": "0", "1e21": "1e+21", "12.5E+1": "125", "0.10000000000000000000001": "0.10000000000000000000001",
		"15e999999999999999999999": "1.5e+1000000000000000000000", "15e-1000000000000000000000": "1.5e-999999999999999999999",
		"99e-1000000000000000000001": "9.9e-1000000000000000000000", "1e-0000000000000000000000000000000005": "0.00001",
	} {
		got, err := idemrt.CanonicalExact([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("exact text of %s = %s (%v), want %s", in, got, err, want)
		}
	}
}

// A huge exponent or a long literal costs work and memory in proportion
// to its length, not to its value.
func TestExactNumbersBoundedWork(t *testing.T) {
	long := []byte("[1" + strings.Repeat("0", 1<<20) + "e-" + strings.Repeat("9", 1<<20) + ",-7e999999999999]")
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	out, err := idemrt.CanonicalExact(long)
	goruntime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("[1e-99999")) || !bytes.HasSuffix(out, []byte(",-7e+999999999999]")) {
		t.Errorf("canonical form %.40q...%.40q", out, out[max(0, len(out)-40):])
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("canonicalising %d bytes allocated %d bytes", len(long), got)
	}
}

// Version 2 writes the RFC 8785 text (what version 1 hashed) for every
// number whose value is that of the shortest text of its double, so that
// fingerprints and fields keys of ordinary requests do not change; version
// 3 hashes the same when every number is written that way.
func TestExactAgreesWithRFC8785OnOrdinaryDocuments(t *testing.T) {
	odd := []byte(`[1e21,1e-7,1e-6,0.000001,-0,5e-324,1.7976931348623157e308,1.5E+300,123e-2,0.1,2.50,100,4.0e2]`)
	for _, d := range [][]byte{jsonDoc(1 << 10), jsonDoc(64 << 10), apiDoc(1 << 10), apiDoc(64 << 10), odd,
		[]byte(`[1e+21,1e-7,0.000001,0,5e-324,1.7976931348623157e+308,1.5e+300,1.23,0.1,2.5,100,400]`)} {
		v1, err := idemrt.CanonicalJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := idemrt.CanonicalExact(d)
		if err != nil || !bytes.Equal(v1, v2) {
			t.Fatalf("exact form differs from RFC 8785 on an ordinary document:\n v1 %.200q\n v2 %.200q (%v)", v1, v2, err)
		}
		f1, _ := idemrt.FingerprintAt(1, "POST", "/x", nil, "application/json", d, nil, nil)
		f2, _ := idemrt.FingerprintAt(2, "POST", "/x", nil, "application/json", d, nil, nil)
		if f1 != f2 {
			t.Errorf("an ordinary document's fingerprint moved from version 1 to 2")
		}
		f3, _ := idemrt.Fingerprint("POST", "/x", nil, "application/json", d, nil, nil)
		if v3, err := idemrt.CanonicalV3(d); (err == nil && bytes.Equal(v3, v2)) != (f3 == f2) || bytes.Equal(d, odd) == (f3 == f2) {
			t.Errorf("%.40q: version 3 text %.80q, version 2 %.80q, equal fingerprints %v", d, v3, v2, f3 == f2)
		}
	}
}

// The order of the values of one query or form name counts; a body that
// is not a form is never split into pairs.
func TestRepeatedValuesKeepTheirOrder(t *testing.T) {
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name                       string
		path1, body1, path2, body2 string
		ctype                      string
	}{
		{"query", "/orders/1?a=1&a=2", `{}`, "/orders/1?a=2&a=1", `{}`, ""},
		{"form", "", "amount=1&amount=2", "", "amount=2&amount=1", form},
		// JSON sent as a form: the & inside its strings are not separators.
		// The first reads amount 1000 (the last duplicate), the second 5.
		{"json as form", "", `{"a":"&","amount":5,"b":"&","amount":1000,"b":"&"}`, "", `{"a":"&","amount":1000,"b":"&","amount":5,"b":"&"}`, form},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &counting{}
			srv := wrap(t, idemrt.Options{}, policy(), h)
			do(srv, req{key: "k1", path: tc.path1, body: tc.body1, ctype: tc.ctype})
			wantProblem(t, do(srv, req{key: "k1", path: tc.path2, body: tc.body2, ctype: tc.ctype}), 422, idemrt.ProblemFingerprintMismatch)
		})
	}
	// What every handler reads alike still merges: the order of different
	// names, and percent-encoding variants of the same bytes.
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k2", path: "/orders/1?a=1&b=x+y&a=2", body: "n=1&m=%C3%A9&n=2", ctype: form})
	w := do(srv, req{key: "k2", path: "/orders/1?b=x%20y&a=1&%61=2", body: "m=%c3%a9&n=1&n=%32", ctype: form})
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("equivalent query and form: %d, want a replay", w.Code)
	}
}

// A record written by version 1 or 2 is compared with its version's
// algorithm: the same request replays (even where the current fingerprint
// differs), another request gets 422; a record of an unknown version is
// accepted. A record written by the current version: the new rules.
func TestVersion1RecordsStillCompare(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, saved, retry, query string
		version                   int
		replay                    bool
	}{
		{"ordinary same", `{"amount":100}`, `{ "amount" : 100.0 }`, "", 1, true},
		{"ordinary other", `{"amount":100}`, `{"amount":101}`, "", 1, false},
		{"big same", `{"amount":9007199254740993}`, `{"amount":9007199254740993}`, "", 1, true},
		{"big other", `{"amount":9007199254740993}`, `{"amount":1}`, "", 1, false},
		{"query order", `{}`, `{}`, "a=2&a=1", 1, true},
		{"unknown version", `{"amount":100}`, `{"amount":5}`, "", 9, true},
		{"v2 ordinary same", `{"amount":100}`, `{ "amount" : 100 }`, "", 2, true},
		{"v2 number text", `{"amount":100}`, `{"amount":1e2}`, "", 2, true},
		{"v2 folded names", `{"amount":1,"Amount":2}`, `{"Amount":2,"amount":1}`, "", 2, true},
		{"v2 other", `{"amount":100}`, `{"amount":101}`, "", 2, false},
		{"v2 big other", `{"amount":9007199254740993}`, `{"amount":9007199254740992}`, "", 2, false},
		{"v3 number text", `{"amount":100}`, `{"amount":1e2}`, "", 3, false},
		{"v3 folded names", `{"amount":1,"Amount":2}`, `{"Amount":2,"amount":1}`, "", 3, false},
		{"v3 same", `{"amount":1,"Amount":2}`, `{"amount":1,"Amount":2}`, "", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := idemrt.NewMemoryStore()
			target := "/orders/1"
			var q string
			if tc.query != "" {
				target += "?" + tc.query
				q = "a=1&a=2" // version 1 sorted the values: the same pairs
			}
			v := tc.version
			if v > idemrt.FingerprintVersion {
				v = 1
			}
			fp1, err := idemrt.FingerprintAt(v, "POST", "/orders/{id}", []string{"1"}, "application/json", []byte(tc.saved), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q != "" {
				// A query's section cannot be reached through FingerprintAt;
				// save the record through a version 1-shaped request
				// instead: version 1 and 2 agree on a=1&a=2 (sorted).
				fp1 = fingerprintThroughEngine(t, "/orders/1?"+q, tc.saved)
			}
			rk := idemrt.RecordKey{Scope: "createOrder", Key: "k1"}
			res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: rk, Fingerprint: fp1, FingerprintVersion: tc.version, Lease: time.Minute, TTL: time.Hour})
			if err != nil || res.State != idemrt.Acquired {
				t.Fatalf("claim: %v %v", res.State, err)
			}
			saved := &idemrt.SavedResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"saved":true}`)}
			if err := st.Complete(ctx, idemrt.Completion{RecordKey: rk, Epoch: res.Epoch, Response: saved, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			h := &counting{}
			srv := wrap(t, idemrt.Options{Store: st}, policy(), h)
			w := do(srv, req{key: "k1", path: target, body: tc.retry})
			if tc.replay {
				if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != `{"saved":true}` {
					t.Errorf("retry of the saved request: %d %s, want the replay", w.Code, w.Body)
				}
			} else {
				wantProblem(t, w, 422, idemrt.ProblemFingerprintMismatch)
			}
			if h.calls.Load() != 0 {
				t.Errorf("handler ran %d times", h.calls.Load())
			}
		})
	}
}

// fingerprintThroughEngine is the fingerprint that the engine stores for a
// request (read from the store's claim).
func fingerprintThroughEngine(t *testing.T, target, body string) [32]byte {
	t.Helper()
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv := wrap(t, idemrt.Options{Store: st}, policy(), &counting{})
	do(srv, req{key: "k1", path: target, body: body})
	return st.claims[0].Fingerprint
}

// Which header version 2 hashes under depends only on what it hashes: an
// excluded (or not included) number that version 1 would have rounded does
// not set two otherwise equal requests apart.
func TestLeftOutNumbersDoNotCount(t *testing.T) {
	for _, tc := range []struct {
		include, exclude []string
		a, b             string
	}{
		{exclude: []string{"/rid"}, a: `{"amount":1,"rid":12345678901234567890123}`, b: `{"amount":1,"rid":5}`},
		{exclude: []string{"/list/1"}, a: `{"amount":1,"list":[1,1e400]}`, b: `{"amount":1,"list":[1,2]}`},
		{include: []string{"/amount"}, a: `{"amount":1,"rid":12345678901234567890123}`, b: `{"amount":1,"rid":5}`},
	} {
		fp := func(body string) [32]byte {
			f, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", []byte(body), tc.include, tc.exclude)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		if fp(tc.a) != fp(tc.b) {
			t.Errorf("include %q exclude %q: %s and %s fingerprint differently", tc.include, tc.exclude, tc.a, tc.b)
		}
	}
}

// An include pointer selects what encoding/json gives a struct field
// tagged with its name: a member whose name equals it only under case
// folding ("Amount" for /amount, which a Go client without json tags
// sends). Version 3 hashed it as absent, so a key reused for another
// amount was answered with the first charge's response instead of 422.
// A record written by version 3 keeps comparing as version 3 did.
func TestIncludeReachesFoldedNames(t *testing.T) {
	include := func(p *idemrt.Policy) { p.FingerprintInclude = []string{"/amount", "/currency"} }
	t.Run("current", func(t *testing.T) {
		h := &counting{}
		srv := wrap(t, idemrt.Options{}, policy(include), h)
		if w := do(srv, req{key: "k1", body: `{"Amount":500,"currency":"usd"}`}); w.Code != 201 {
			t.Fatalf("first: %d %s", w.Code, w.Body)
		}
		wantProblem(t, do(srv, req{key: "k1", body: `{"Amount":5000,"currency":"usd"}`}), 422, idemrt.ProblemFingerprintMismatch)
		wantProblem(t, do(srv, req{key: "k1", body: `{"currency":"usd"}`}), 422, idemrt.ProblemFingerprintMismatch)
		wantProblem(t, do(srv, req{key: "k1", body: `{"amount":500,"currency":"usd"}`}), 422, idemrt.ProblemFingerprintMismatch)
		if w := do(srv, req{key: "k1", body: `{"currency":"usd", "Amount":500, "note":"x"}`}); w.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry with the same included values: %d, want a replay", w.Code)
		}
		if n := h.calls.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
	})
	t.Run("version 3 record", func(t *testing.T) {
		ctx := context.Background()
		st := idemrt.NewMemoryStore()
		fp3, err := idemrt.FingerprintAt(3, "POST", "/orders/{id}", []string{"1"}, "application/json", []byte(`{"Amount":500,"currency":"usd"}`), []string{"/amount", "/currency"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rk := idemrt.RecordKey{Scope: "createOrder", Key: "k1"}
		res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: rk, Fingerprint: fp3, FingerprintVersion: 3, Lease: time.Minute, TTL: time.Hour})
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim: %v %v", res.State, err)
		}
		saved := &idemrt.SavedResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"saved":true}`)}
		if err := st.Complete(ctx, idemrt.Completion{RecordKey: rk, Epoch: res.Epoch, Response: saved, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		h := &counting{}
		srv := wrap(t, idemrt.Options{Store: st}, policy(include), h)
		if w := do(srv, req{key: "k1", body: `{"Amount":500,"currency":"usd"}`}); w.Code != 201 || w.Body.String() != `{"saved":true}` {
			t.Errorf("retry of the version 3 request: %d %s, want the replay", w.Code, w.Body)
		}
		wantProblem(t, do(srv, req{key: "k1", body: `{"amount":7,"currency":"usd"}`}), 422, idemrt.ProblemFingerprintMismatch)
		if n := h.calls.Load(); n != 0 {
			t.Errorf("handler ran %d times", n)
		}
	})
}
