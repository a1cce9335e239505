package runtime_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Issue 21, item 4: requests that encoding/json reads differently must not
// share a fingerprint or a fields key.

func fpV3(t *testing.T, body string, exclude ...string) [32]byte {
	t.Helper()
	f, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", []byte(body), nil, exclude)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// decodeField decodes body into a struct whose field is tagged name and
// returns the field's value (encoding/json matches names case-insensitively).
func decodeField(t *testing.T, body, name string) any {
	t.Helper()
	var v struct {
		Amount, Kind, Status, ID int
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	switch name {
	case "amount":
		return v.Amount
	case "kind":
		return v.Kind
	case "status":
		return v.Status
	}
	return v.ID
}

// Member names equal under encoding/json's case folding are duplicates:
// a struct field gets the last of them, so their order counts.
func TestFoldedNamesAreDuplicates(t *testing.T) {
	for _, tc := range []struct{ a, b, field string }{
		{`{"amount":1,"Amount":2}`, `{"Amount":2,"amount":1}`, "amount"},
		{`{"amount":1,"AMOUNT":2}`, `{"AMOUNT":2,"amount":1}`, "amount"},
		// The Kelvin sign folds to k, the long s to s (encoding/json's
		// foldRune: the smallest rune of the unicode.SimpleFold orbit),
		// escaped or not.
		{`{"kind":1,"\u212aind":2}`, `{"\u212aind":2,"kind":1}`, "kind"},
		{"{\"kind\":1,\"\u212aind\":2}", "{\"\u212aind\":2,\"kind\":1}", "kind"},
		{`{"status":1,"\u017ftatus":2}`, `{"\u017ftatus":2,"status":1}`, "status"},
		{`{"id":1,"ID":2}`, `{"ID":2,"id":1}`, "id"},
		{`{"x":{"amount":1,"Amount":2}}`, `{"x":{"Amount":2,"amount":1}}`, ""},
		{`[{"id":1,"ID":2}]`, `[{"ID":2,"id":1}]`, ""},
		// More than 32 members: checked at the object's end.
		{manyMembers(40, `"amount":1,"AMOUNT":2`), manyMembers(40, `"AMOUNT":2,"amount":1`), "amount"},
		{manyMembers(40, `"id":1,"\u0130d":0,"ID":2`), manyMembers(40, `"ID":2,"\u0130d":0,"id":1`), "id"},
		// More than 16 members.
		{`{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,"q":0,"amount":1,"AMOUNT":2}`,
			`{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,"q":0,"AMOUNT":2,"amount":1}`, "amount"},
	} {
		if tc.field != "" {
			// What encoding/json makes of them: two values.
			if va, vb := decodeField(t, tc.a, tc.field), decodeField(t, tc.b, tc.field); va == vb {
				t.Fatalf("%s and %s: encoding/json reads %s alike (%v); the case proves nothing", tc.a, tc.b, tc.field, va)
			}
		}
		if fpV3(t, tc.a) == fpV3(t, tc.b) {
			t.Errorf("%s and %s share a fingerprint", tc.a, tc.b)
		}
		// Left out or not, the order decides what a struct field gets.
		if fpV3(t, tc.a, "/amount") == fpV3(t, tc.b, "/amount") {
			t.Errorf("%s and %s share a fingerprint with /amount excluded", tc.a, tc.b)
		}
		if _, err := idemrt.CanonicalV3([]byte(tc.a)); err == nil {
			t.Errorf("%s is canonicalised", tc.a)
		}
	}
	// Names that fold apart are ordinary members, in any order.
	for _, tc := range [][2]string{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`{"ka":1,"kb":2,"K":3}`, `{"K":3,"kb":2,"ka":1}`},
		{`{"ß":1,"ss":2,"s":3}`, `{"s":3,"ss":2,"ß":1}`},
		{`{"amount":1,"amount_":2,"a-mount":3}`, `{"a-mount":3,"amount_":2,"amount":1}`},
		// Names whose hashes collide (the check sets every byte's 0x20
		// bit) but that fold apart.
		{"{\"@\":1,\"`\":2,\"[a\":3,\"{A\":4}", "{\"{A\":4,\"[a\":3,\"`\":2,\"@\":1}"},
		{manyMembers(40, "\"@\":1,\"`\":2"), manyMembers(40, "\"`\":2,\"@\":1")},
		// The dotted capital I folds to itself, not to i.
		{`{"id":1,"\u0130d":2}`, `{"\u0130d":2,"id":1}`},
	} {
		if fpV3(t, tc[0]) != fpV3(t, tc[1]) {
			t.Errorf("%s and %s (names that fold apart) fingerprint differently", tc[0], tc[1])
		}
	}
}

// Through the middleware: the second order under the same key is a 422,
// not a replay of what the handler made of the first.
func TestFoldedNamesUnderOneKey(t *testing.T) {
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	if w := do(srv, req{key: "k1", body: `{"amount":1,"Amount":2}`}); w.Code != http.StatusCreated {
		t.Fatalf("first: %d", w.Code)
	}
	wantProblem(t, do(srv, req{key: "k1", body: `{"Amount":2,"amount":1}`}), 422, idemrt.ProblemFingerprintMismatch)
	if w := do(srv, req{key: "k1", body: `{"amount":1,"Amount":2}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same bytes again: %d, want a replay", w.Code)
	}
}

// A number keeps the text it is written in: an int field refuses 1e2 and
// 100.0, json.Number keeps the text.
func TestNumbersKeepTheirText(t *testing.T) {
	forms := []string{"100", "1e2", "100.0", "1E2", "1e+2", "1.0e2", "100.00", "10e1"}
	seen := map[[32]byte]string{}
	for _, n := range forms {
		f := fpV3(t, `{"amount":`+n+`}`)
		if prev, ok := seen[f]; ok {
			t.Errorf("amount %s and %s share a fingerprint", prev, n)
		}
		seen[f] = n
		var v struct{ Amount int }
		errInt := json.Unmarshal([]byte(`{"amount":`+n+`}`), &v)
		if (n == "100") != (errInt == nil) {
			t.Errorf("encoding/json into an int: %s gives %v", n, errInt)
		}
	}
	for _, pair := range [][2]string{{"0", "-0"}, {"0.5", "0.50"}, {"-0.0", "0.0"}, {"1.5e300", "15e299"}} {
		if fpV3(t, pair[0]) == fpV3(t, pair[1]) {
			t.Errorf("%s and %s share a fingerprint", pair[0], pair[1])
		}
	}
	// Whitespace, member order and string escapes are not seen by
	// encoding/json: they still do not count.
	if fpV3(t, `{"amount":100,"note":"é/"}`) != fpV3(t, " {\n\"note\" : \"\\u00e9\\/\", \"amount\" :100 } ") {
		t.Error("member order, whitespace or escapes changed the fingerprint")
	}
	// Through the middleware, in both orders.
	for _, tc := range [][2]string{{"100", "1e2"}, {"1e2", "100"}, {"100", "100.0"}} {
		h := &counting{}
		srv := wrap(t, idemrt.Options{}, policy(), h)
		do(srv, req{key: "k1", body: `{"amount":` + tc[0] + `}`})
		wantProblem(t, do(srv, req{key: "k1", body: `{"amount":` + tc[1] + `}`}), 422, idemrt.ProblemFingerprintMismatch)
	}
}

// A fields key is never derived from one of two folded-equal names: the
// handler reads the other.
func TestFieldsKeyRefusesFoldedNames(t *testing.T) {
	for _, body := range []string{
		`{"charge":"ch","amount":5,"Amount":500}`, `{"charge":"ch","Amount":500,"amount":5}`,
		`{"charge":"ch","amount":5,"AMOUNT":500}`, `{"charge":"ch","Charge":"other","amount":5}`,
		`{"charge":"ch","amount":5,"meta":{"x":1,"X":2}}`,
	} {
		if k, ok := idemrt.FieldsKey("refunds", []byte(body), "charge", "amount"); ok {
			t.Errorf("key %q derived from %s", k, body)
		}
	}
	if k, ok := idemrt.FieldsKey("refunds", []byte(`{"charge":"ch","amount":5,"Charges":1}`), "charge", "amount"); !ok || k != `refunds:"ch",5` {
		t.Errorf("ordinary body: key %q %v", k, ok)
	}
	refunds := func(p *idemrt.Policy) {
		p.Key, p.KeyName, p.KeyFields, p.Scope = idemrt.KeyFromFields, "", []string{"charge", "amount"}, "refunds"
	}
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(refunds), h)
	wantProblem(t, do(srv, req{body: `{"charge":"ch","amount":5,"Amount":500}`}), 400, idemrt.ProblemKeyMissing)
	if h.calls.Load() != 0 {
		t.Errorf("handler ran %d times", h.calls.Load())
	}
	// An optional key runs unprotected, as with an exact duplicate.
	h = &counting{}
	srv = wrap(t, idemrt.Options{}, policy(refunds, func(p *idemrt.Policy) { p.Optional = true }), h)
	for _, body := range []string{`{"charge":"ch","amount":5,"amount":500}`, `{"charge":"ch","amount":5,"Amount":500}`} {
		if w := do(srv, req{body: body}); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
			t.Errorf("optional key, %s: %d", body, w.Code)
		}
	}
	if h.calls.Load() != 2 {
		t.Errorf("optional: handler ran %d times, want 2", h.calls.Load())
	}
}

// Content-Encoding counts, and the body under it counts as raw bytes: a
// handler behind a decompressor reads something else.
func TestContentEncodingCounts(t *testing.T) {
	body := []byte(`{"amount":1}`)
	plain, _ := idemrt.Fingerprint("POST", "/x", nil, "application/json", body, nil, nil)
	noEnc, _ := idemrt.FingerprintEncoded("POST", "/x", nil, "application/json", nil, body, nil, nil)
	if plain != noEnc {
		t.Error("FingerprintEncoded without an encoding differs from Fingerprint")
	}
	all := map[[32]byte][]string{plain: nil}
	for _, enc := range [][]string{{"gzip"}, {"GZIP"}, {"identity"}, {""}, {"gzip", "br"}, {"br", "gzip"}, {"gzip, br"}} {
		f, _ := idemrt.FingerprintEncoded("POST", "/x", nil, "application/json", enc, body, nil, nil)
		if prev, ok := all[f]; ok {
			t.Errorf("Content-Encoding %q and %q share a fingerprint", enc, prev)
		}
		all[f] = enc
	}
	// Under an encoding the body is bytes: respacing it is another request.
	a, _ := idemrt.FingerprintEncoded("POST", "/x", nil, "application/json", []string{"identity"}, body, nil, nil)
	b, _ := idemrt.FingerprintEncoded("POST", "/x", nil, "application/json", []string{"identity"}, []byte(`{ "amount":1}`), nil, nil)
	if a == b {
		t.Error("two encoded bodies with different bytes share a fingerprint")
	}
	// Through the middleware.
	h := &counting{}
	srv := wrap(t, idemrt.Options{}, policy(), h)
	do(srv, req{key: "k1", body: string(body)})
	wantProblem(t, do(srv, req{key: "k1", body: string(body), header: http.Header{"Content-Encoding": {"identity"}}}), 422, idemrt.ProblemFingerprintMismatch)
	// A fields key is not derived from an encoded body.
	srv = wrap(t, idemrt.Options{}, policy(func(p *idemrt.Policy) {
		p.Key, p.KeyName, p.KeyFields, p.Scope = idemrt.KeyFromFields, "", []string{"amount"}, "orders"
	}), h)
	wantProblem(t, do(srv, req{body: string(body), header: http.Header{"Content-Encoding": {"identity"}}}), 400, idemrt.ProblemKeyMissing)
}

// manyMembers is an object of n members m0...m(n-1) followed by extra.
func manyMembers(n int, extra string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		fmt.Fprintf(&b, `"m%d":%d,`, i, i)
	}
	b.WriteString(extra)
	b.WriteByte('}')
	return b.String()
}

// The fold check is skipped for an object whose keys are those of a cached
// shape that passed it; a shape cached without the check (version 2, for an
// old record) or an object with a member left out is checked.
func TestFoldCheckAndShapeCache(t *testing.T) {
	// raw is the version 3 fingerprint of a body hashed as raw bytes.
	raw := func(body string) [32]byte {
		return sha256.Sum256([]byte("idemgen-fp\x003\x04POST\x02/x\x00r" + body))
	}
	for range 3 {
		for _, tc := range []struct {
			body    string
			exclude []string
		}{
			{`[{"b":1,"B":2}]`, nil},
			{`[{"b":1,"B":2},{"b":1,"B":2}]`, nil},
			{`[{"a":1,"b":2},{"a":1,"b":2,"B":3}]`, nil},
			{`[{"X":2,"a":0},{"x":1,"X":2,"a":0}]`, []string{"/1/x"}},
			{`[{"a":0,"X":2},{"a":0,"x":1,"X":2}]`, []string{"/1/x"}},
			// Two shapes per record at one depth (the cache keeps both).
			{`[{"m":{"a":1,"b":2},"p":{"c":1,"d":2}},{"m":{"a":1,"b":2},"p":{"c":1,"d":2,"D":3}}]`, nil},
			{`[{"m":{"a":1,"b":2},"p":{"d":1,"c":2}},{"m":{"a":1,"b":2},"p":{"d":1,"c":2,"C":3}}]`, nil},
			{`[{"m":{"a":1,"b":2},"p":{"c":1,"d":2}},{"m":{"a":1,"b":2,"B":0},"p":{"c":1,"d":2}}]`, nil},
		} {
			// Prime the pooled canonicaliser with version 2 (no check).
			if _, err := idemrt.FingerprintAt(2, "POST", "/x", nil, "application/json", []byte(tc.body), nil, tc.exclude); err != nil {
				t.Fatal(err)
			}
			if fpV3(t, tc.body, tc.exclude...) != raw(tc.body) {
				t.Errorf("%s (exclude %q) is not refused", tc.body, tc.exclude)
			}
		}
		// Shapes that pass: a hit is still an ordinary object.
		a := `[{"b":1,"a":2,"m":{"x":1,"y":2},"p":{"z":3,"w":4}},{"b":1,"a":2,"m":{"x":1,"y":2},"p":{"z":3,"w":4}},{"a":2,"b":1}]`
		b := `[{"a":2,"b":1,"p":{"w":4,"z":3},"m":{"y":2,"x":1}},{"b":1,"a":2,"m":{"x":1,"y":2},"p":{"z":3,"w":4}},{"b":1,"a":2}]`
		if fpV3(t, a) != fpV3(t, b) || fpV3(t, a) == raw(a) {
			t.Errorf("%s and %s fingerprint differently, or raw", a, b)
		}
	}
}
