package runtime_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func canon(t testing.TB, in string) string {
	t.Helper()
	out, err := idemrt.CanonicalJSON([]byte(in))
	if err != nil {
		t.Fatalf("CanonicalJSON(%q): %v", in, err)
	}
	return string(out)
}

// RFC 8785 §3.2.4 / Appendix B number test vectors (IEEE-754 bits).
func TestCanonicalNumbersRFC8785(t *testing.T) {
	vectors := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, v := range vectors {
		f := math.Float64frombits(v.bits)
		in := strconv.FormatFloat(f, 'g', -1, 64)
		if got := canon(t, in); got != v.want {
			t.Errorf("%016x (%s): got %s, want %s", v.bits, in, got, v.want)
		}
	}
	for in, want := range map[string]string{
		"-0": "0", "1E2": "100", "1.50": "1.5", "0.1e1": "1", "123456789012345": "123456789012345",
		"12345678901234567890": "12345678901234567000", "1e-7": "1e-7", "-1.0e+30": "-1e+30",
	} {
		if got := canon(t, in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

// RFC 8785 §3.2.2 example and §3.2.3 sorting example.
func TestCanonicalRFC8785Examples(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := canon(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	sorting := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got := canon(t, sorting)
	var order []string
	dec := json.NewDecoder(strings.NewReader(got))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		order = append(order, k.(string))
		dec.Token()
	}
	wantOrder := []string{"\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33"}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("key order %q, want %q (UTF-16 code unit order)", order, wantOrder)
	}
	if !strings.HasPrefix(got, `{"\r":"Carriage Return","1":"One","`+"\u0080"+`":"Control"`) {
		t.Errorf("canonical form %s", got)
	}
}

func TestCanonicalRejects(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,}`, `[1,]`, `{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `"\ud800"`, `"\udc00x"`,
		`1e400`, `01`, `1.`, `.5`, `+1`, `"a` + "\x01" + `"`, "\"\xff\"", `nul`, `[1] 2`, `{"a" 1}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
	} {
		if out, err := idemrt.CanonicalJSON([]byte(in)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %q, want an error", in, out)
		}
	}
}

func TestFingerprintSemantics(t *testing.T) {
	fp := func(method, route string, params []string, ct, body string, inc, exc []string) [32]byte {
		t.Helper()
		f, err := idemrt.Fingerprint(method, route, params, ct, []byte(body), inc, exc)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := fp("POST", "/o/{id}", []string{"1"}, "application/json", `{"a":1,"b":[1,2]}`, nil, nil)
	same := []([32]byte){
		fp("POST", "/o/{id}", []string{"1"}, "application/json; charset=utf-8", `{ "b":[1, 2], "a":1 }`, nil, nil),
		fp("POST", "/o/{id}", []string{"1"}, "application/merge-patch+json", `{"b":[1,2],"a":1}`, nil, nil),
	}
	for i, s := range same {
		if s != base {
			t.Errorf("equal JSON #%d hashed differently", i)
		}
	}
	differ := map[string][32]byte{
		"method":     fp("PUT", "/o/{id}", []string{"1"}, "application/json", `{"a":1,"b":[1,2]}`, nil, nil),
		"route":      fp("POST", "/p/{id}", []string{"1"}, "application/json", `{"a":1,"b":[1,2]}`, nil, nil),
		"param":      fp("POST", "/o/{id}", []string{"2"}, "application/json", `{"a":1,"b":[1,2]}`, nil, nil),
		"body":       fp("POST", "/o/{id}", []string{"1"}, "application/json", `{"a":1,"b":[2,1]}`, nil, nil),
		"raw":        fp("POST", "/o/{id}", []string{"1"}, "text/plain", `{"a":1,"b":[1,2]}`, nil, nil),
		"params-cut": fp("POST", "/o/{id}", []string{"1", ""}, "application/json", `{"a":1,"b":[1,2]}`, nil, nil),
		// Version 3: numbers as written (encoding/json tells them apart).
		"number-text": fp("POST", "/o/{id}", []string{"1"}, "application/json", `{"a":1e0,"b":[1,2.0]}`, nil, nil),
	}
	for name, d := range differ {
		if d == base {
			t.Errorf("changing the %s did not change the fingerprint", name)
		}
	}
	// Raw bodies: byte for byte.
	if fp("POST", "/", nil, "text/plain", "a b", nil, nil) == fp("POST", "/", nil, "text/plain", "a  b", nil, nil) {
		t.Error("raw bodies with different bytes hash the same")
	}
	// Form bodies: names in any order and any encoding of the same bytes,
	// but the values of one name in their order.
	if fp("POST", "/", nil, "application/x-www-form-urlencoded", "b=2&a=1&a=0", nil, nil) != fp("POST", "/", nil, "application/x-www-form-urlencoded", "a=1&b=%32&a=0", nil, nil) {
		t.Error("reordered form names hash differently")
	}
	if fp("POST", "/", nil, "application/x-www-form-urlencoded", "b=2&a=1&a=0", nil, nil) == fp("POST", "/", nil, "application/x-www-form-urlencoded", "a=0&a=1&b=2", nil, nil) {
		t.Error("reordered values of one form name hash the same")
	}
	if fp("POST", "/", nil, "application/x-www-form-urlencoded", "a=1", nil, nil) == fp("POST", "/", nil, "application/x-www-form-urlencoded", "a=2", nil, nil) {
		t.Error("different form values hash the same")
	}
	// Invalid JSON falls back to raw bytes (deterministic, still sensitive).
	if fp("POST", "/", nil, "application/json", "{bad", nil, nil) == fp("POST", "/", nil, "application/json", "{bad ", nil, nil) {
		t.Error("invalid JSON bodies with different bytes hash the same")
	}
	// Exclude inside arrays and escaped pointer tokens.
	a := fp("POST", "/", nil, "application/json", `{"a/b":1,"m~n":2,"list":[{"t":1,"v":1}]}`, nil, []string{"/a~1b", "/m~0n", "/list/0/t"})
	b := fp("POST", "/", nil, "application/json", `{"a/b":9,"m~n":9,"list":[{"t":9,"v":1}]}`, nil, []string{"/a~1b", "/m~0n", "/list/0/t"})
	c := fp("POST", "/", nil, "application/json", `{"a/b":9,"m~n":9,"list":[{"t":9,"v":2}]}`, nil, []string{"/a~1b", "/m~0n", "/list/0/t"})
	if a != b || a == c {
		t.Error("exclude pointers with ~0/~1 and array indexes not honoured")
	}
}

// shuffled re-serialises a decoded JSON value with shuffled object members,
// random whitespace and random (equivalent) number and string spellings.
func shuffled(v any, r *rand.Rand) []byte {
	var b bytes.Buffer
	var walk func(v any)
	ws := func() {
		for n := r.IntN(3); n > 0; n-- {
			b.WriteByte(" \n\t\r"[r.IntN(4)])
		}
	}
	walk = func(v any) {
		ws()
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
				ws()
				kb, _ := json.Marshal(k)
				b.Write(kb)
				ws()
				b.WriteByte(':')
				walk(x[k])
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			ws()
			b.WriteByte(']')
		case float64:
			formats := []byte{'e', 'E', 'g', 'f'}
			s := strconv.FormatFloat(x, formats[r.IntN(4)], -1, 64)
			if x == 0 && r.IntN(2) == 0 {
				s = "-0.0"
			}
			b.WriteString(s)
		case string:
			if r.IntN(2) == 0 {
				// Escape everything as \uXXXX.
				b.WriteByte('"')
				for _, u := range utf16Units(x) {
					b.WriteString(`\u`)
					b.WriteString(strconv.FormatUint(uint64(u)|0x10000, 16)[1:])
				}
				b.WriteByte('"')
			} else {
				sb, _ := json.Marshal(x)
				b.Write(sb)
			}
		default:
			jb, _ := json.Marshal(x)
			b.Write(jb)
		}
		ws()
	}
	walk(v)
	return b.Bytes()
}

func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		} else {
			out = append(out, uint16(r))
		}
	}
	return out
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x\u0000y"],"c":{"é":1.5e10,"e":-0.0}}`,
		`[1e21,1e-7,123456789012345678,0.1,"\ud83d\ude00",{"":""}]`,
		`"\u20ac\"\\\/\b\f\n\r\t"`, `{"a":{"a":{"a":[]}}}`, `  3  `, `{"z":1,"y":2,"x":3}`,
		`{"a":1,"a":2}`, `{"\ufb33":1,"\ud83d\ude00":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := idemrt.CanonicalJSON(in)
		if err != nil {
			if json.Valid(in) && !refusalAllowed(in) {
				t.Fatalf("valid JSON %q refused: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("invalid JSON %q accepted as %q", in, out)
		}
		// Exactly what an independent RFC 8785 implementation gives.
		if ref, err := referenceCanonical(in); err != nil || !bytes.Equal(ref, out) {
			t.Fatalf("canonical form of %q:\n got %q\nwant %q (%v)", in, out, ref, err)
		}
		// Stable: canonicalising twice gives the same bytes.
		again, err := idemrt.CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not stable: %q -> %q -> %q (%v)", in, out, again, err)
		}
		// Semantically equal documents canonicalise (and so hash) the same.
		var v any
		if err := json.Unmarshal(in, &v); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", in, err)
		}
		var w any
		if err := json.Unmarshal(out, &w); err != nil {
			t.Fatalf("canonical output %q is not JSON: %v", out, err)
		}
		if !jsonEqual(v, w) {
			t.Fatalf("canonical form changed the value: %q -> %q", in, out)
		}
		sum := sha256.Sum256(in)
		r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), 1))
		for i := 0; i < 3; i++ {
			alt := shuffled(v, r)
			altOut, err := idemrt.CanonicalJSON(alt)
			if err != nil {
				t.Fatalf("re-serialised %q refused: %v", alt, err)
			}
			if !bytes.Equal(altOut, out) {
				t.Fatalf("equal documents canonicalise differently:\n %q -> %q\n %q -> %q", in, out, alt, altOut)
			}
			// Version 1 hashes the RFC 8785 form (float64 numbers, as the
			// re-serialisation writes them); version 2's exact numbers are
			// checked by FuzzExactFingerprint.
			fa, _ := idemrt.FingerprintAt(1, "POST", "/x", nil, "application/json", in, nil, nil)
			fb, _ := idemrt.FingerprintAt(1, "POST", "/x", nil, "application/json", alt, nil, nil)
			if fa != fb {
				t.Fatalf("equal documents fingerprint differently: %q vs %q", in, alt)
			}
		}
	})
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !jsonEqual(v, y[k]) {
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
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// hasDuplicateKeys reports whether some object in the document repeats a
// member name.
func hasDuplicateKeys(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
			case '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
			} else if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
		if len(stack) == 0 && !dec.More() {
			return false
		}
	}
}

// refusalAllowed reports whether valid JSON may be refused by RFC 8785:
// invalid UTF-8, duplicate keys, lone surrogates (approximated by any
// \uD8xx-\uDFxx escape), numbers beyond float64, or deep nesting.
func refusalAllowed(in []byte) bool {
	if !utf8.Valid(in) || hasDuplicateKeys(in) || bytes.Contains(bytes.ToLower(in), []byte(`\ud`)) {
		return true
	}
	if bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) >= 500 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return true
			}
		}
	}
}

// The benchmark documents and the RFC examples agree with the reference.
func TestCanonicalMatchesReference(t *testing.T) {
	docs := [][]byte{jsonDoc(1 << 10), jsonDoc(64 << 10), []byte(`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`),
		[]byte(`[1e21,1e-7,1e-6,0.000001,123456789012345678901,-0,5e-324,1.7976931348623157e308,"\u0000\u001f\u007f"]`)}
	for _, d := range docs {
		got, err := idemrt.CanonicalJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		want, err := referenceCanonical(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical form differs from the reference:\n got %.200q\nwant %.200q", got, want)
		}
	}
}

// FuzzFingerprintExclude checks the exclude pointers against an
// independent removal: fingerprinting a document with exclude pointers
// must equal fingerprinting the document re-serialised without the
// members and elements they name.
func FuzzFingerprintExclude(f *testing.F) {
	for _, s := range [][3]string{
		{`{"a":1,"b":{"c":2,"d":[1,{"e":3}]},"z":"x\u00e9"}`, "/b/c", "/b/d/1/e"},
		{`{ "drop" : 1 , "keep" : [ 1 , 2 , 3 ] }`, "/drop", "/keep/1"},
		{`[{"b":1,"a":2},{"b":3,"a":4}]`, "/0/a", "/1"},
		{`{"m~n":1,"a/b":2,"c":3}`, "/m~0n", "/a~1b"},
		{`{"x":{"y":1.50,"w":-0},"v":"\/"}`, "/x/y", "/v"},
	} {
		f.Add([]byte(s[0]), s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, in []byte, p1, p2 string) {
		if _, err := idemrt.CanonicalJSON(in); err != nil {
			return
		}
		ptrs := []string{p1, p2}
		var toks [][]string
		for _, p := range ptrs {
			if !strings.HasPrefix(p, "/") {
				return
			}
			ts := strings.Split(p[1:], "/")
			for i, tk := range ts {
				if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(tk), "~") {
					return // not a valid pointer
				}
				ts[i] = strings.ReplaceAll(strings.ReplaceAll(tk, "~1", "/"), "~0", "~")
			}
			toks = append(toks, ts)
		}
		got, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", in, nil, ptrs)
		if err != nil {
			t.Fatalf("Fingerprint(%q, exclude %q): %v", in, ptrs, err)
		}
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode %q: %v", in, err)
		}
		rest, err := json.Marshal(removePointers(v, toks))
		if err != nil {
			t.Fatal(err)
		}
		want, err := idemrt.Fingerprint("POST", "/x", nil, "application/json", rest, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			c, _ := idemrt.CanonicalJSON(rest)
			t.Fatalf("%q excluding %q does not fingerprint as %q (canonical %q)", in, ptrs, rest, c)
		}
	})
}

// removePointers deletes the members and elements that the pointer tokens
// name (array indexes refer to the original positions).
func removePointers(v any, toks [][]string) any {
	step := func(name string) (drop bool, sub [][]string) {
		for _, ts := range toks {
			if len(ts) == 0 || ts[0] != name {
				continue
			}
			if len(ts) == 1 {
				drop = true
			} else {
				sub = append(sub, ts[1:])
			}
		}
		return drop, sub
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if drop, sub := step(k); !drop {
				out[k] = removePointers(e, sub)
			}
		}
		return out
	case []any:
		out := []any{}
		for i, e := range x {
			if drop, sub := step(strconv.Itoa(i)); !drop {
				out = append(out, removePointers(e, sub))
			}
		}
		return out
	}
	return v
}

// Arrays of records reuse the sort order (and the in-place key match) of
// the previous object at the same depth; objects that differ from it in
// any way must still canonicalise exactly.
func TestCanonicalShapeCache(t *testing.T) {
	first := `{"b":1,"a":2}`
	for _, next := range []string{
		`{"b":1,"a":2}`, `{"b":3,"a":{"d":1,"c":2}}`, `{"b":1,"a":2,"c":3}`, `{"b":1}`, `{"a":1,"b":2}`,
		`{"\u0062":1,"a":2}`, `{"b" :1, "a":2}`, `{"bb":1,"a":2}`, `{"":1,"a":2}`, `{"b":1,"\u0061":2}`,
		`{"b\"":1,"a":2}`, `{"b":1,"a":2,"a":3}`, `{"b":1,"b":2}`, `{"b":1,"a":2,"é":3,"\ud83d\ude00":4}`,
	} {
		for _, doc := range []string{
			"[" + first + "," + next + "]",
			"[" + first + "," + next + "," + first + "," + next + "]",
			`[{"sixsix":1,"fourteen_chars":2,"fifteen__chars!":3,"a_key_well_over_16_bytes":4},` + next + "]",
			`[{"sixsix":1,"fourteen_chars":2,"fifteen__chars!":3,"a_key_well_over_16_bytes":4},{"sixsix":1,"fourteen_chars":2,"fifteen__chars!":3,"a_key_well_over_16_bytes":4}]`,
			`[{"sixsix":1,"fourteen_chars":2},{"sixsix":1,"fourteen_charz":2}]`,
			`[{"b":1,"a":2},{"b":1,"a":2}]`, // the last key ends near the end of the input
			"[" + first + ",[" + next + "]," + next + "]",
		} {
			got, err := idemrt.CanonicalJSON([]byte(doc))
			if hasDuplicateKeys([]byte(doc)) {
				if err == nil {
					t.Errorf("%s: duplicate key accepted as %s", doc, got)
				}
				continue
			}
			want, rerr := referenceCanonical([]byte(doc))
			if err != nil || rerr != nil || !bytes.Equal(got, want) {
				t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", doc, got, err, want, rerr)
			}
		}
	}
}
