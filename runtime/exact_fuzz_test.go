package runtime_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// FuzzExactFingerprint is a differential test of version 3 fingerprints and
// fields keys against encoding/json. Two JSON bodies share a fingerprint
// exactly when encoding/json decodes them into any with UseNumber to equal
// values (numbers compared as their text, which json.Number keeps); and
// when they share one, decoding both into typed structs built from the
// document (int, int8, uint, float, json.Number, string, []byte, pointer,
// slice, array, map and nested struct fields, tagged with the member's name
// in its own or another letter case) gives equal values, and errors alike.
// A fields key over them is one key exactly when the values are equal as
// exact decimals (math/big.Rat). Each input is also checked against
// re-spellings of itself (members shuffled, whitespace, string escapes;
// numbers kept, or written another exact way), against a copy with one
// number changed, and for the header its version 2 form gets.
func FuzzExactFingerprint(f *testing.F) {
	for _, s := range [][2]string{
		{`{"amount":9007199254740993}`, `{"amount":9007199254740992}`},
		{`{"id":1234567890123456789}`, `{"id":1234567890123456788}`},
		{`1000`, `1e3`}, {`1000.0`, `1001`}, {`-0`, `0`}, {`-0.0e7`, `0E-3`},
		{`1e400`, `10e399`}, {`1e-400`, `0`}, {`[1,2]`, `[2,1]`},
		{`{"a":1,"b":[true,null,"x"]}`, `{ "b" : [true,null,"x"], "a" : 1.0 }`},
		{`"\u00e9\/"`, `"é/"`}, {`{"a":1,"a":2}`, `{"a":2}`},
		{`1.5e-7`, `0.00000015`}, {`12345678901234567890`, `12345678901234567891`},
		{`0.1`, `0.1000000000000000055511151231257827`}, {`{bad`, `{bad`}, {`[1e21,1e-7]`, `[1000000000000000000000,0.0000001]`},
		{`{"x":{"y":[1.10,2e2]}}`, `{"x":{"y":[1.1,200]}}`}, {`123456789012345678901234567890e-10`, `12345678901234567890.123456789`},
		{`{"amount":1,"Amount":2}`, `{"Amount":2,"amount":1}`}, {`{"amount":100}`, `{"amount":1e2}`},
		{`{"kind":1,"\u212aind":2}`, `{"\u212aind":2,"kind":1}`}, {`{"s":1,"\u017f":2}`, `{"\u017f":2,"s":1}`},
		{`{"charge":"ch","amount":5,"Amount":500}`, `{"charge":"ch","amount":500}`},
		{`{"a":{"B":[1,{"c":"x"}]},"n":null,"t":true}`, `{"t":true,"n":null,"a":{"B":[1,{"c":"\u0078"}]}}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkExactPair(t, a, b)
		checkOlderTags(t, a)
		va, ok := decodeNumbers(a)
		if !ok {
			return
		}
		sum := sha256.Sum256(a)
		r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), 2))
		checkExactPair(t, a, respell(va, r, false))
		alt := respell(va, r, true)
		checkExactPair(t, a, alt)
		if m, ok := bumpNumber(va); ok {
			changed, _ := json.Marshal(m)
			checkExactPair(t, a, changed)
			checkExactPair(t, alt, changed)
		}
	})
}

// checkOlderTags checks that version 3 hashes a JSON body exactly as
// version 2 did when their canonical forms agree, and differently when they
// do not; and version 2 likewise against version 1.
func checkOlderTags(t *testing.T, in []byte) {
	t.Helper()
	v1, err1 := idemrt.CanonicalJSON(in)
	v2, err2 := idemrt.CanonicalExact(in)
	v3, err3 := idemrt.CanonicalV3(in)
	f1, _ := idemrt.FingerprintAt(1, "POST", "/x", nil, "application/json", in, nil, nil)
	f2, _ := idemrt.FingerprintAt(2, "POST", "/x", nil, "application/json", in, nil, nil)
	f3, _ := idemrt.Fingerprint("POST", "/x", nil, "application/json", in, nil, nil)
	if err2 == nil {
		if same := err1 == nil && bytes.Equal(v1, v2); same != (f1 == f2) {
			t.Fatalf("%q: canonical forms agree %v (v1 %q, v2 %q), fingerprints agree %v", in, same, v1, v2, f1 == f2)
		}
	}
	switch {
	case err2 == nil && err3 == nil:
		if same := bytes.Equal(v2, v3); same != (f2 == f3) {
			t.Fatalf("%q: canonical forms agree %v (v2 %q, v3 %q), fingerprints agree %v", in, same, v2, v3, f2 == f3)
		}
	case err2 == nil:
		// Version 3 refuses (folded-equal names) what version 2 took.
		if f2 == f3 {
			t.Fatalf("%q: raw in version 3, canonical in version 2, one fingerprint", in)
		}
	case err3 == nil:
		t.Fatalf("%q: version 3 canonicalises (%q) what version 2 refuses (%v)", in, v3, err2)
	}
}

// FuzzFormFingerprint: two form bodies (or queries) share a fingerprint
// only when they are the same bytes or net/http reads them alike
// (url.ParseQuery: the same names with the same values in the same order).
func FuzzFormFingerprint(f *testing.F) {
	for _, s := range [][2]string{
		{"amount=1&amount=2", "amount=2&amount=1"}, {"a=1&b=2", "b=2&a=1"}, {"a=%41", "a=A"}, {"a=x+y", "a=x%20y"},
		{"a", "a="}, {"a=1&&b=2", "b=2&a=1&"}, {`{"a":"&","amount":5}`, `"amount":5}&{"a":"`}, {"a=1;b=2", "b=2;a=1"},
		{"a=%zz", "a=%zz"}, {"x=[1]&y=(2)", "y=(2)&x=[1]"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		fp := func(s string) ([32]byte, [32]byte) {
			form, _ := idemrt.Fingerprint("POST", "/x", nil, "application/x-www-form-urlencoded", []byte(s), nil, nil)
			query := fingerprintOfQuery(t, s)
			return form, query
		}
		fa, qa := fp(a)
		fb, qb := fp(b)
		for _, same := range []bool{fa == fb, qa == qb} {
			if !same || a == b {
				continue
			}
			va, errA := url.ParseQuery(a)
			vb, errB := url.ParseQuery(b)
			if errA != nil || errB != nil || !reflect.DeepEqual(va, vb) {
				t.Fatalf("%q and %q share a fingerprint, read as %v (%v) and %v (%v)", a, b, va, errA, vb, errB)
			}
		}
	})
}

// fingerprintOfQuery is the fingerprint the engine computes for a request
// with the raw query q (read from the store's claim).
func fingerprintOfQuery(t *testing.T, q string) [32]byte {
	st := &faultStore{Store: idemrt.NewMemoryStore()}
	srv, err := idemrt.Wrap(idemrt.Options{Store: st}, policy(), &counting{})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/orders/1", strings.NewReader(`{}`))
	r.URL.RawQuery = q
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k1")
	srv.ServeHTTP(httptest.NewRecorder(), r)
	if len(st.claims) != 1 {
		t.Fatalf("query %q: %d claims", q, len(st.claims))
	}
	return st.claims[0].Fingerprint
}

// checkExactPair checks the fingerprints and fields keys of a and b
// against what encoding/json makes of them.
func checkExactPair(t *testing.T, a, b []byte) {
	t.Helper()
	fp := func(in []byte) [32]byte {
		f, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", in, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	fa, fb := fp(a), fp(b)
	_, errA := idemrt.CanonicalV3(a)
	_, errB := idemrt.CanonicalV3(b)
	switch {
	case errA == nil && errB == nil:
		va, okA := decodeNumbers(a)
		vb, okB := decodeNumbers(b)
		if !okA || !okB {
			t.Fatalf("%q or %q: canonicalised, but encoding/json refuses it", a, b)
		}
		eq := reflect.DeepEqual(va, vb)
		if eq != (fa == fb) {
			t.Fatalf("%q and %q: equal values (numbers as text) %v, equal fingerprints %v", a, b, eq, fa == fb)
		}
		if fa == fb {
			checkTyped(t, a, b, va)
		}
		// A fields key over them: {"id": <value>}: exact decimals.
		xa, okA := decodeExact(a)
		xb, okB := decodeExact(b)
		if !okA || !okB {
			return // numbers too large to compare as big.Rat
		}
		eq = exactEqual(xa, xb)
		ka, okA := idemrt.FieldsKey("s", []byte(`{"id":`+string(a)+`}`), "id")
		kb, okB := idemrt.FieldsKey("s", []byte(`{"id":`+string(b)+`}`), "id")
		if !okA || !okB {
			if va != nil {
				t.Fatalf("%q or %q: canonical, but no fields key", a, b)
			}
			return
		}
		if eq != (ka == kb) {
			t.Fatalf("%q and %q: equal values %v, keys %q and %q", a, b, eq, ka, kb)
		}
	case errA != nil && errB != nil:
		// Both hashed raw: byte for byte.
		if (fa == fb) != bytes.Equal(a, b) {
			t.Fatalf("raw bodies %q and %q: equal fingerprints %v", a, b, fa == fb)
		}
	default:
		if fa == fb {
			t.Fatalf("%q and %q: one JSON, one raw, equal fingerprints", a, b)
		}
	}
}

// decodeNumbers decodes a document that version 3 canonicalises, numbers
// as json.Number (their text).
func decodeNumbers(in []byte) (any, bool) {
	if _, err := idemrt.CanonicalV3(in); err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// maxRatDigits bounds the numbers compared with big.Rat (10^exponent is
// computed in full).
const maxRatDigits = 4000

// decodeExact decodes a document that the canonicaliser accepts, numbers as
// json.Number; ok is false when it is not JSON or a number is too large to
// compare exactly here.
func decodeExact(in []byte) (any, bool) {
	if _, err := idemrt.CanonicalExact(in); err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, ratSized(v)
}

func ratSized(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !ratSized(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !ratSized(e) {
				return false
			}
		}
	case json.Number:
		s := string(x)
		if len(s) > maxRatDigits {
			return false
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			e, err := strconv.Atoi(strings.TrimLeft(s[i+1:], "+-"))
			if err != nil || e > maxRatDigits {
				return false
			}
		}
	}
	return true
}

func exactEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !exactEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !exactEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	default:
		return a == b
	}
}

// respell writes v again: members shuffled, whitespace added, strings
// escaped or not, and every number as it was (keep) or in another exact
// spelling.
func respell(v any, r *rand.Rand, keep bool) []byte {
	var b bytes.Buffer
	var walk func(v any)
	walk = func(v any) {
		if r.IntN(3) == 0 {
			b.WriteString(" \n")
		}
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteByte(':')
				walk(x[k])
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			b.WriteByte(']')
		case json.Number:
			if keep {
				b.WriteString(string(x))
			} else {
				b.WriteString(respellNumber(string(x), r))
			}
		default:
			jb, _ := json.Marshal(x)
			b.Write(jb)
		}
	}
	walk(v)
	return b.Bytes()
}

// respellNumber writes a number literal another way with the same exact
// value: a trailing fraction zero, an exponent of zero, or one more digit
// with the exponent lowered by one; -0 for zero.
func respellNumber(s string, r *rand.Rand) string {
	mant, exp, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp, hasExp = s[:i], s[i+1:], true
	}
	if strings.Trim(mant, "-0.") == "" && r.IntN(2) == 0 {
		return "-0.0"
	}
	switch r.IntN(3) {
	case 0:
		if strings.Contains(mant, ".") {
			return mant + "0" + s[len(mant):]
		}
		return mant + ".0" + s[len(mant):]
	case 1:
		if !hasExp {
			return s + "E+0"
		}
	}
	e := 0
	if hasExp {
		var err error
		if e, err = strconv.Atoi(exp); err != nil {
			return s
		}
	}
	if strings.Contains(mant, ".") {
		// Move the point one digit left: 12.5 = 1.25e1.
		i := strings.IndexByte(mant, '.')
		digits := strings.TrimLeft(mant[:i], "-")
		if len(digits) < 2 {
			return mant + "0" + s[len(mant):]
		}
		neg := strings.HasPrefix(mant, "-")
		m := digits[:len(digits)-1] + "." + digits[len(digits)-1:] + mant[i+1:]
		if neg {
			m = "-" + m
		}
		return m + "e" + strconv.Itoa(e+1)
	}
	return mant + "0e" + strconv.Itoa(e-1)
}

// bumpNumber changes the first number of v to a different value.
func bumpNumber(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if m, ok := bumpNumber(x[k]); ok {
				y := make(map[string]any, len(x))
				for k2, e := range x {
					y[k2] = e
				}
				y[k] = m
				return y, true
			}
		}
	case []any:
		for i, e := range x {
			if m, ok := bumpNumber(e); ok {
				y := slices.Clone(x)
				y[i] = m
				return y, true
			}
		}
	case json.Number:
		s := string(x)
		mant, rest := s, ""
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			mant, rest = s[:i], s[i:]
		}
		if strings.Contains(mant, ".") {
			return json.Number(mant + "1" + rest), true
		}
		return json.Number(mant + ".1" + rest), true
	}
	return nil, false
}
