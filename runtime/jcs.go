package runtime

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/idemgen/idemgen/internal/jsonnames"
)

// errNotJSON is returned for input that RFC 8785 cannot canonicalise:
// malformed JSON, invalid UTF-8, lone surrogates, duplicate object keys,
// numbers out of float64 range (not with exact numbers, which take any),
// or nesting deeper than maxJSONDepth.
var errNotJSON = errors.New("not canonicalisable JSON")

// errFoldedDuplicate is returned (with fold set) for an object with two
// member names that are not equal but that encoding/json matches to the
// same struct field ("amount" and "Amount"): which value a handler gets
// depends on their order.
var errFoldedDuplicate = jsonnames.ErrFoldedDuplicate

const maxJSONDepth = 512

// canonicalizer holds reusable buffers; it is pooled by the engine.
type canonicalizer struct {
	in      []byte
	out     []byte
	scratch []byte
	keys    []byte
	mem     []jsonMember
	excl    [][]string
	depth   int
	// exact selects exact numbers (fingerprint version 2 and fields keys):
	// a number's canonical text is its decimal value, not the value of the
	// nearest double (see appendExactNumber). RFC 8785's form (the tests'
	// CanonicalJSON) and version 1 leave it false.
	exact bool
	// v1differs is set (with exact) when the exact text of a number in the
	// output is not the text that version 1 writes for it (or version 1
	// refuses it). Excluded members do not count: it depends only on the
	// canonical output.
	v1differs bool
	// verbNum (fingerprint version 3) keeps every number's text as it is
	// written: encoding/json tells 100 from 1e2 and 100.0 (an int field
	// refuses them, json.Number keeps the text). v2differs is set (with
	// verbNum) when a number's text is not its exact canonical text, so
	// that version 3's form is not version 2's; like v1differs, only the
	// canonical output counts.
	verbNum, v2differs bool
	// fold refuses (errFoldedDuplicate) objects with two member names
	// equal under encoding/json's case folding (fingerprint version 3 and
	// fields keys); folds is the stack of the open objects' name hashes.
	fold  bool
	folds []foldedName
	fbuf  []byte
	// foldPtr (fingerprint version 4) lets an include pointer's token
	// reach a member whose name equals it only under encoding/json's case
	// folding (/amount reaches "Amount", as a struct field tagged "amount"
	// does); v3differs is set when one did, so that version 4's form is
	// not version 3's.
	foldPtr, v3differs bool
	// digits, v1num and ntext are scratch for exact numbers.
	digits, v1num, ntext []byte
	// pairs and pbuf hold a decoded query or form (queryform.go).
	pairs []qpair
	pbuf  []byte
	// vs, ve is the pending verbatim span: the output so far is out
	// followed by in[vs:ve]. Input that is already canonical (most of it)
	// is copied in long runs instead of token by token.
	vs, ve int
	// flushes counts flush calls: a member during which it does not move
	// was copied from the input in one verbatim run.
	flushes int
	// shapes caches, per nesting depth, the last unsorted object's keys
	// (in document order) and the permutation that sorts them: arrays of
	// records repeat one shape, and then sorting is a lookup.
	shapes [8]objShape
	// alts holds, with fold set, the shape each depth cached before the
	// current one: records often hold two nested objects of different
	// shapes (an item's metadata and its price), which would otherwise
	// replace each other at every record.
	alts [8]objShape
}

type objShape struct {
	keys []byte // keys in document order, each followed by 0xFF
	perm []int32
	kw   []keyWords // per key: its compact input form, to match in place
	// foldOK: the keys passed the fold check (canonicalizer.fold), with no
	// member left out; an object with the same keys passes it too.
	foldOK bool
}

// keyWords holds the compact input form `key":` of a short key without
// quotes, backslashes or control characters, as two little-endian words
// and the masks of their meaningful bytes: a key in the input whose 16
// bytes after the opening quote match under the masks is that key,
// followed by its closing quote and the colon. n is the length of
// `key":` (0: the key is too long or needs escapes).
type keyWords struct {
	w0, w1, m0, m1 uint64
	n              int32
}

// matches reports whether the key whose opening quote is at in[kq] (with
// 16 bytes after it) is kw's key, followed by its closing quote and colon.
func (kw *keyWords) matches(in []byte, kq int) bool {
	return kw.n > 0 && (binary.LittleEndian.Uint64(in[kq+1:])^kw.w0)&kw.m0 == 0 &&
		(binary.LittleEndian.Uint64(in[kq+9:])^kw.w1)&kw.m1 == 0
}

func makeKeyWords(k []byte) keyWords {
	if len(k)+2 > 16 {
		return keyWords{}
	}
	for _, b := range k {
		if b < 0x20 || b == '"' || b == '\\' {
			return keyWords{}
		}
	}
	var b [16]byte
	n := copy(b[:], k)
	b[n], b[n+1] = '"', ':'
	n += 2
	kw := keyWords{n: int32(n)}
	kw.w0 = binary.LittleEndian.Uint64(b[:8])
	kw.w1 = binary.LittleEndian.Uint64(b[8:])
	if n >= 8 {
		kw.m0 = math.MaxUint64
		kw.m1 = 1<<(8*uint(n-8)) - 1
	} else {
		kw.m0 = 1<<(8*uint(n)) - 1
	}
	return kw
}

type jsonMember struct {
	// pfx is the key's first 8 bytes, big-endian: for keys without bytes
	// >= 0xEE (where UTF-8 and UTF-16 orders part), comparing pfx orders
	// the keys unless it ties.
	pfx    uint64
	ks, ke int32 // key bytes: keys[ks:ke] if arena, else in[ks:ke]
	os, oe int32 // the member ("key":value) in c.out
	idx    int32 // position in the document (for the shape cache)
	is, ie int32 // the member in c.in, if verb
	verb   bool  // the member's canonical form is in[is:ie]
	arena  bool  // key was unescaped into c.keys
	slow   bool  // key has a byte >= 0xEE: compare with compareUTF16
}

func keyPrefix(k []byte) (uint64, bool) {
	var p uint64
	if len(k) >= 8 {
		p = binary.BigEndian.Uint64(k)
	} else {
		for i := 0; i < 8; i++ {
			p <<= 8
			if i < len(k) {
				p |= uint64(k[i])
			}
		}
	}
	for _, b := range k {
		if b >= 0xee {
			return p, true
		}
	}
	return p, false
}

func (c *canonicalizer) cmpMember(a, b *jsonMember) int {
	if a.pfx != b.pfx && !a.slow && !b.slow {
		if a.pfx < b.pfx {
			return -1
		}
		return 1
	}
	return compareUTF16(c.keyBytes(a), c.keyBytes(b))
}

// sortMembers sorts ms by key: insertion sort for the small objects that
// are the common case.
func (c *canonicalizer) sortMembers(ms []jsonMember) {
	for i := range ms {
		ms[i].pfx, ms[i].slow = keyPrefix(c.keyBytes(&ms[i]))
	}
	if len(ms) > 16 {
		slices.SortFunc(ms, func(a, b jsonMember) int { return c.cmpMember(&a, &b) })
		return
	}
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		j := i
		for j > 0 && c.cmpMember(&ms[j-1], &m) > 0 {
			ms[j] = ms[j-1]
			j--
		}
		ms[j] = m
	}
}

// canonicalize appends the canonical form of in to c.out, leaving out the
// object members that the exclude pointers (tokens) name.
func (c *canonicalizer) canonicalize(in []byte, exclude [][]string) error {
	if !utf8.Valid(in) {
		return errNotJSON
	}
	c.in, c.excl, c.depth = in, exclude, 0
	c.mem, c.keys, c.folds = c.mem[:0], c.keys[:0], c.folds[:0]
	var mask uint64
	if len(exclude) > 0 {
		mask = 1<<uint(len(exclude)) - 1
		if len(exclude) == 64 {
			mask = math.MaxUint64
		}
	}
	c.vs, c.ve = 0, 0
	pos, err := c.anyValue(0, mask, 0)
	c.flush()
	if err != nil {
		return err
	}
	if skipWS(in, pos) != len(in) {
		return errNotJSON
	}
	return nil
}

func skipWS(in []byte, pos int) int {
	for pos < len(in) {
		switch in[pos] {
		case ' ', '\t', '\n', '\r':
			pos++
		default:
			return pos
		}
	}
	return pos
}

// flush appends the pending verbatim span to out.
func (c *canonicalizer) flush() {
	if c.ve > c.vs {
		c.out = append(c.out, c.in[c.vs:c.ve]...)
	}
	c.vs = c.ve
	c.flushes++
}

// verbatim appends in[s:e], which is already canonical, to the output.
func (c *canonicalizer) verbatim(s, e int) {
	if s != c.ve {
		c.flush()
		c.vs = s
	}
	c.ve = e
}

// olen is the length of the output so far.
func (c *canonicalizer) olen() int { return len(c.out) + c.ve - c.vs }

// value appends the canonical form of the value at in[pos] to c.out.
func (c *canonicalizer) value(pos int, mask uint64, pdepth int) (int, error) {
	c.vs, c.ve = 0, 0
	pos, err := c.anyValue(pos, mask, pdepth)
	c.flush()
	return pos, err
}

func (c *canonicalizer) anyValue(pos int, mask uint64, pdepth int) (int, error) {
	in := c.in
	pos = skipWS(in, pos)
	if pos >= len(in) {
		return pos, errNotJSON
	}
	switch in[pos] {
	case '{':
		return c.object(pos, mask, pdepth)
	case '[':
		return c.array(pos, mask, pdepth)
	case '"':
		return c.str(pos)
	case 't':
		return c.literal(pos, "true")
	case 'f':
		return c.literal(pos, "false")
	case 'n':
		return c.literal(pos, "null")
	default:
		return c.numberLazy(pos)
	}
}

// inlineValue is value with the common cases first and no extra call for
// strings.
func (c *canonicalizer) inlineValue(pos int, mask uint64, pdepth int) (int, error) {
	in := c.in
	if pos < len(in) && in[pos] <= ' ' {
		pos = skipWS(in, pos)
	}
	if pos >= len(in) {
		return pos, errNotJSON
	}
	switch ch := in[pos]; {
	case ch == '"':
		if pos+17 <= len(in) { // see strStops
			off, m := pos+1, strStops(binary.LittleEndian.Uint64(in[pos+1:]))
			if m == 0 {
				off, m = pos+9, strStops(binary.LittleEndian.Uint64(in[pos+9:]))
			}
			if i := off + bits.TrailingZeros64(m)>>3; m != 0 && in[i] == '"' {
				c.verbatim(pos, i+1)
				return i + 1, nil
			}
		}
		return c.str(pos)
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.numberLazy(pos)
	case ch == '{':
		return c.object(pos, mask, pdepth)
	case ch == '[':
		return c.array(pos, mask, pdepth)
	}
	return c.anyValue(pos, mask, pdepth)
}

// strStops flags (in the high bit of each byte) the quotes, backslashes
// and control characters in eight bytes of input; the lowest flag is
// exact (higher ones may be false positives).
func strStops(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := v ^ (ones * '"')
	b := v ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (v-ones*0x20)&^v) & highs
}

// The hot loops find the end of short strings (most keys and values) with
// this inline check of the 16 bytes after the opening quote at in[pos];
// they fall back to scanString when it finds no closing quote or finds an
// escape first:
//
//	end := 0
//	if pos+17 <= len(in) {
//		off, m := pos+1, strStops(binary.LittleEndian.Uint64(in[pos+1:]))
//		if m == 0 {
//			off, m = pos+9, strStops(binary.LittleEndian.Uint64(in[pos+9:]))
//		}
//		if i := off + bits.TrailingZeros64(m)>>3; m != 0 && in[i] == '"' {
//			end = i + 1
//		}
//	}

func (c *canonicalizer) literal(pos int, lit string) (int, error) {
	if len(c.in)-pos < len(lit) || string(c.in[pos:pos+len(lit)]) != lit {
		return pos, errNotJSON
	}
	c.verbatim(pos, pos+len(lit))
	return pos + len(lit), nil
}

// scanString finds the end of the string starting at in[pos] == '"'. It
// returns the index after the closing quote and whether it holds escapes.
func scanString(in []byte, pos int) (int, bool, error) {
	end, esc, err := scanStr(in, pos)
	return end, esc != escNone, err
}

// What scanStr found in a string.
const (
	escNone  = iota // no escapes
	escCanon        // only escapes that RFC 8785 writes as they are
	escOther        // escapes that canonicalisation rewrites (\/, \u...)
)

// scanStr is scanString that also tells whether the escapes are canonical.
func scanStr(in []byte, pos int) (int, int, error) {
	esc := escNone
	i := pos + 1
	for {
		// Eight bytes at a time: the lowest flagged byte of the SWAR test is
		// exactly the first quote, backslash or control character.
		found := false
		for i+8 <= len(in) {
			if m := strStops(binary.LittleEndian.Uint64(in[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				found = true
				break
			}
			i += 8
		}
		if !found {
			for i < len(in) && strSafe[in[i]] {
				i++
			}
			if i >= len(in) {
				return i, escNone, errNotJSON
			}
		}
		switch in[i] {
		case '"':
			return i + 1, esc, nil
		case '\\':
			if esc == escNone {
				esc = escCanon
			}
			if i+1 < len(in) {
				switch in[i+1] {
				case '"', '\\', 'b', 'f', 'n', 'r', 't':
				default:
					// \/ and all \u escapes take the slow path (which
					// also validates them).
					esc = escOther
				}
			}
			i += 2
		default:
			return i, escNone, errNotJSON
		}
	}
}

func (c *canonicalizer) str(pos int) (int, error) {
	end, esc, err := scanStr(c.in, pos)
	if err != nil {
		return end, err
	}
	if esc != escOther {
		// Valid UTF-8 without control characters and with only canonical
		// escapes is canonical.
		c.verbatim(pos, end)
		return end, nil
	}
	c.flush()
	c.out = append(c.out, '"')
	c.out, err = unescapeJSON(c.out, c.in[pos+1:end-1], true)
	if err != nil {
		return end, err
	}
	c.out = append(c.out, '"')
	return end, nil
}

const hexDigits = "0123456789abcdef"

// unescapeJSON decodes the body of a JSON string (between the quotes) and
// appends it to dst, re-escaped canonically when canon is set, raw
// otherwise.
func unescapeJSON(dst, s []byte, canon bool) ([]byte, error) {
	for i := 0; i < len(s); {
		ch := s[i]
		if ch != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return dst, errNotJSON
		}
		var r rune
		switch s[i+1] {
		case '"':
			r = '"'
		case '\\':
			r = '\\'
		case '/':
			r = '/'
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var ok bool
			r, ok = hex4(s, i+2)
			if !ok {
				return dst, errNotJSON
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
					return dst, errNotJSON
				}
				r2, ok := hex4(s, i+8)
				if !ok || r2 < 0xdc00 || r2 > 0xdfff {
					return dst, errNotJSON
				}
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
			i += 4
		default:
			return dst, errNotJSON
		}
		i += 2
		if canon {
			dst = appendCanonRune(dst, r)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst, nil
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, ch := range s[i : i+4] {
		r <<= 4
		switch {
		case '0' <= ch && ch <= '9':
			r |= rune(ch - '0')
		case 'a' <= ch && ch <= 'f':
			r |= rune(ch - 'a' + 10)
		case 'A' <= ch && ch <= 'F':
			r |= rune(ch - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

func appendCanonRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// appendCanonString appends s (raw UTF-8) as a canonical JSON string.
func appendCanonString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' {
			j++
		}
		dst = append(dst, s[i:j]...)
		if j < len(s) {
			dst = appendCanonRune(dst, rune(s[j]))
			j++
		}
		i = j
	}
	return append(dst, '"')
}

// number appends the canonical form of the number at in[pos] to c.out.
func (c *canonicalizer) number(pos int) (int, error) {
	pos, err := c.numberLazy(pos)
	c.flush()
	return pos, err
}

func (c *canonicalizer) numberLazy(pos int) (int, error) {
	in := c.in
	start := pos
	if pos < len(in) && in[pos] == '-' {
		pos++
	}
	intStart := pos
	if pos >= len(in) {
		return pos, errNotJSON
	}
	if in[pos] == '0' {
		pos++
	} else if in[pos] >= '1' && in[pos] <= '9' {
		for pos < len(in) && in[pos] >= '0' && in[pos] <= '9' {
			pos++
		}
	} else {
		return pos, errNotJSON
	}
	intEnd := pos
	dot, hasExp := -1, false
	if pos < len(in) && in[pos] == '.' {
		dot = pos
		pos++
		d := pos
		for pos < len(in) && in[pos] >= '0' && in[pos] <= '9' {
			pos++
		}
		if pos == d {
			return pos, errNotJSON
		}
	}
	fracEnd := pos
	expStart := pos
	if pos < len(in) && (in[pos] == 'e' || in[pos] == 'E') {
		hasExp = true
		pos++
		expStart = pos
		if pos < len(in) && (in[pos] == '+' || in[pos] == '-') {
			pos++
		}
		d := pos
		for pos < len(in) && in[pos] >= '0' && in[pos] <= '9' {
			pos++
		}
		if pos == d {
			return pos, errNotJSON
		}
	}
	lit := in[start:pos]
	if c.verbNum {
		if !c.v2differs {
			c.checkV2Number(lit, start != intStart, in[intStart:intEnd], dot, in[intStart:fracEnd], in[expStart:pos], hasExp)
		}
		c.verbatim(start, pos)
		return pos, nil
	}
	if !hasExp {
		if ok, long := c.fastNumber(start, in[start:intStart], in[intStart:intEnd], dot, fracEnd); ok {
			if long && !c.v1differs {
				c.checkV1Number(lit, start != intStart, in[intStart:fracEnd], nil)
			}
			return pos, nil
		}
	}
	if c.exact {
		c.flush()
		c.out = c.appendExactNumber(c.out, start != intStart, in[intStart:fracEnd], in[expStart:pos])
		if !c.v1differs {
			c.checkV1Number(lit, start != intStart, in[intStart:fracEnd], in[expStart:pos])
		}
		return pos, nil
	}
	f, err := strconv.ParseFloat(unsafe.String(&lit[0], len(lit)), 64)
	if err != nil || math.IsInf(f, 0) {
		return pos, errNotJSON
	}
	c.flush()
	c.out = appendES6Number(c.out, f)
	return pos, nil
}

// fastNumber writes the canonical form of a number without exponent that
// has at most 15 significant digits and is not below 1e-6: such a decimal
// is exactly the shortest representation of its double, so ECMAScript
// prints its own digits (trailing fraction zeros and a -0 sign dropped).
// With exact numbers the digit limit is that of ECMAScript's plain layout
// instead (at most 21 integer digits): the number's own digits are its
// exact canonical form.
// The literal is in[start:fracEnd]; when it is its own canonical form (no
// fraction zeros dropped, no -0) it is copied as it is.
//
// long reports that the exact limits applied where version 1's did not
// (more than 15 significant digits).
func (c *canonicalizer) fastNumber(start int, sign, intPart []byte, dot, fracEnd int) (ok, long bool) {
	var frac []byte
	trimmed := false
	if dot >= 0 {
		frac = c.in[dot+1 : fracEnd]
		for len(frac) > 0 && frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
			trimmed = true
		}
	}
	if len(intPart) == 1 && intPart[0] == '0' {
		if len(frac) == 0 {
			if len(sign) == 0 && dot < 0 {
				c.verbatim(start, fracEnd)
				return true, long
			}
			c.flush()
			c.out = append(c.out, '0')
			return true, long
		}
		lz := 0
		for lz < len(frac) && frac[lz] == '0' {
			lz++
		}
		if lz >= 6 || (len(frac)-lz > 15 && !c.exact) {
			return false, false
		}
		long = len(frac)-lz > 15
		if !trimmed {
			c.verbatim(start, fracEnd)
			return true, long
		}
		c.flush()
		c.out = append(c.out, sign...)
		c.out = append(c.out, '0', '.')
		c.out = append(c.out, frac...)
		return true, long
	}
	if len(intPart)+len(frac) > 15 && (!c.exact || len(intPart) > 21) {
		return false, false
	}
	long = len(intPart)+len(frac) > 15
	if !trimmed {
		c.verbatim(start, fracEnd)
		return true, long
	}
	c.flush()
	c.out = append(c.out, sign...)
	c.out = append(c.out, intPart...)
	if len(frac) > 0 {
		c.out = append(c.out, '.')
		c.out = append(c.out, frac...)
	}
	return true, long
}

// appendES6Number formats f as ECMAScript's Number.prototype.toString
// does (RFC 8785 §3.2.2.3).
func appendES6Number(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var tmp [32]byte
	b := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	// b is d[.ddd]e±XX
	var digits [24]byte
	k := 0
	i := 0
	for ; i < len(b) && b[i] != 'e'; i++ {
		if b[i] != '.' {
			digits[k] = b[i]
			k++
		}
	}
	exp := 0
	neg := b[i+1] == '-'
	for _, ch := range b[i+2:] {
		exp = exp*10 + int(ch-'0')
	}
	if neg {
		exp = -exp
	}
	return appendDecimal(dst, digits[:k], int64(exp+1))
}

// appendDecimal writes the positive decimal 0.d × 10^n (d: significant
// digits, no leading or trailing zeros) in ECMAScript's Number layout:
// plain digits while 10^-7 < value < 10^21, else d.ddde±x.
func appendDecimal(dst, d []byte, n int64) []byte {
	k := int64(len(d))
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for j := int64(0); j < n-k; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := int64(0); j < -n; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = appendSci(dst, d)
		e := n - 1
		if e >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
			e = -e
		}
		dst = strconv.AppendInt(dst, e, 10)
	}
	return dst
}

// appendSci writes d[0] [. d[1:]] e.
func appendSci(dst, d []byte) []byte {
	dst = append(dst, d[0])
	if len(d) > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	return append(dst, 'e')
}

// appendExactNumber writes the exact canonical text of a JSON number: the
// ECMAScript layout of its decimal value (as appendDecimal), worked out on
// the digits, never through a float64, so that two numbers get one text
// exactly when they denote the same decimal value (1000 = 1000.0 = 1e3,
// -0 = 0; 2^53+1 != 2^53). Whenever the value is that of the shortest
// text of its nearest double, this is the RFC 8785 text too. mant is the
// digits with the optional fraction point; exp the exponent's optional sign
// and digits (empty: none). The work is linear in the literal's length,
// whatever the exponent (1e999999999 is "1e+999999999").
func (c *canonicalizer) appendExactNumber(dst []byte, neg bool, mant, exp []byte) []byte {
	intLen := len(mant)
	for i, ch := range mant {
		if ch == '.' {
			intLen = i
			break
		}
	}
	first, last := -1, -1
	for i, ch := range mant {
		if ch != '.' && ch != '0' {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return append(dst, '0')
	}
	// The value is 0.d × 10^(n0 + exponent).
	var n0 int64
	if first < intLen {
		n0 = int64(intLen - first)
	} else {
		n0 = -int64(first - intLen - 1)
	}
	d := c.digits[:0]
	for _, ch := range mant[first : last+1] {
		if ch != '.' {
			d = append(d, ch)
		}
	}
	c.digits = d
	if neg {
		dst = append(dst, '-')
	}
	eneg := false
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		eneg = exp[0] == '-'
		exp = exp[1:]
	}
	for len(exp) > 0 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) <= 18 {
		var e int64
		for _, ch := range exp {
			e = e*10 + int64(ch-'0')
		}
		if eneg {
			e = -e
		}
		return appendDecimal(dst, d, n0+e)
	}
	// |exponent| >= 10^18: always the d.ddde±x layout, with x = exponent +
	// n0 - 1 added in decimal (|n0 - 1| is below the input's length, so the
	// sign stays the exponent's).
	dst = appendSci(dst, d)
	if eneg {
		dst = append(dst, '-')
	} else {
		dst = append(dst, '+')
	}
	delta := n0 - 1
	if eneg {
		delta = -delta
	}
	mark := len(dst)
	dst = append(dst, exp...)
	if delta >= 0 {
		return addDecimal(dst, mark, uint64(delta))
	}
	return subDecimal(dst, mark, uint64(-delta))
}

// checkV1Number sets c.v1differs when version 1 (float64, RFC 8785) would
// not write the exact text of this number: its value is not that of the
// shortest text of its nearest double, or it is out of float64's range.
func (c *canonicalizer) checkV1Number(lit []byte, neg bool, mant, exp []byte) {
	f, err := strconv.ParseFloat(unsafe.String(&lit[0], len(lit)), 64)
	if err != nil || math.IsInf(f, 0) {
		c.v1differs = true
		return
	}
	v1 := appendES6Number(c.v1num[:0], f)
	mark := len(v1)
	v1 = c.appendExactNumber(v1, neg, mant, exp)
	c.v1num = v1
	if string(v1[:mark]) != string(v1[mark:]) {
		c.v1differs = true
	}
}

// checkV2Number sets c.v2differs when the literal lit is not the exact
// canonical text of its value (version 2's text: 100.0, 1e2, -0, 1E+2 are
// not; 100, 1e+21, 0.5 are), and otherwise checks it against version 1 as
// version 2 does. intPart is the integer digits, dot the fraction point's
// offset in the input (-1: none), mant the digits with the point and exp
// the exponent's sign and digits.
func (c *canonicalizer) checkV2Number(lit []byte, neg bool, intPart []byte, dot int, mant, exp []byte, hasExp bool) {
	if !hasExp {
		var frac []byte
		if dot >= 0 {
			frac = mant[len(intPart)+1:]
		}
		if ok, long := plainExact(neg, intPart, frac, dot >= 0); ok {
			if long && !c.v1differs {
				c.checkV1Number(lit, neg, mant, nil)
			}
			return
		}
	}
	c.ntext = c.appendExactNumber(c.ntext[:0], neg, mant, exp)
	if string(c.ntext) != string(lit) {
		c.v2differs = true
		return
	}
	if !c.v1differs {
		c.checkV1Number(lit, neg, mant, exp)
	}
}

// plainExact reports whether a number without exponent (sign, integer
// digits, fraction digits after a point when hasDot) is written as its
// exact canonical text: no fraction zeros at the end, not -0, at most 21
// integer digits, not below 1e-6 (those are written with an exponent).
// long reports more than 15 significant digits (where version 1's text
// may differ).
func plainExact(neg bool, intPart, frac []byte, hasDot bool) (ok, long bool) {
	if hasDot && (len(frac) == 0 || frac[len(frac)-1] == '0') {
		return false, false
	}
	if len(intPart) == 1 && intPart[0] == '0' {
		if !hasDot {
			return !neg, false
		}
		lz := 0
		for lz < len(frac) && frac[lz] == '0' {
			lz++
		}
		return lz < 6, len(frac)-lz > 15
	}
	if len(intPart) > 21 {
		return false, false
	}
	return true, len(intPart)+len(frac) > 15
}

// addDecimal adds v to the decimal digits dst[mark:].
func addDecimal(dst []byte, mark int, v uint64) []byte {
	for i := len(dst) - 1; i >= mark && v > 0; i-- {
		s := uint64(dst[i]-'0') + v%10
		v /= 10
		if s >= 10 {
			s -= 10
			v++
		}
		dst[i] = byte(s) + '0'
	}
	if v > 0 {
		var pre [20]byte
		p := strconv.AppendUint(pre[:0], v, 10)
		dst = append(dst, p...)
		copy(dst[mark+len(p):], dst[mark:len(dst)-len(p)])
		copy(dst[mark:], p)
	}
	return dst
}

// subDecimal subtracts v from the decimal digits dst[mark:], which are
// larger than v, and drops the leading zeros that leaves.
func subDecimal(dst []byte, mark int, v uint64) []byte {
	for i := len(dst) - 1; i >= mark && v > 0; i-- {
		s := int(dst[i]-'0') - int(v%10)
		v /= 10
		if s < 0 {
			s += 10
			v++
		}
		dst[i] = byte(s) + '0'
	}
	z := mark
	for z < len(dst)-1 && dst[z] == '0' {
		z++
	}
	return append(dst[:mark], dst[z:]...)
}

func (c *canonicalizer) keyBytes(m *jsonMember) []byte {
	if m.arena {
		return c.keys[m.ks:m.ke]
	}
	return c.in[m.ks:m.ke]
}

// strSafe marks the bytes that a JSON string holds as they are.
var strSafe = func() (t [256]bool) {
	for i := 0x20; i < 256; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// objState is what the end of an object needs from reading its members.
type objState struct {
	base, keysBase, foldBase int    // len(c.mem), len(c.keys), len(c.folds) at '{'
	objStart                 int    // the output's length after '{'
	bloom                    uint64 // addFold's filter of this object's name hashes
	// While the keys so far are those of the cached shape for this depth
	// (sc), shapeOff is the offset of the next one in sc.keys; else -1.
	sc       *objShape
	shapeOff int
	sorted   bool // the members are in order
	skipped  bool // a member was left out (exclude)
	allVerb  bool // every member is verbatim (mp.verb)
	count    int  // members kept
}

func (c *canonicalizer) object(pos int, mask uint64, pdepth int) (int, error) {
	c.depth++
	if c.depth > maxJSONDepth {
		return pos, errNotJSON
	}
	in := c.in
	c.verbatim(pos, pos+1) // '{'
	pos++
	st := objState{base: len(c.mem), keysBase: len(c.keys), foldBase: len(c.folds), objStart: c.olen()}
	pos = skipWS(in, pos)
	if pos < len(in) && in[pos] == '}' {
		c.verbatim(pos, pos+1)
		c.depth--
		return pos + 1, nil
	}
	pos, err := c.members(&st, pos, mask, pdepth)
	if err != nil {
		return pos, err
	}
	if err := c.endObject(&st, pos); err != nil {
		return pos, err
	}
	c.verbatim(pos, pos+1) // '}'
	c.mem = c.mem[:st.base]
	c.keys = c.keys[:st.keysBase]
	c.depth--
	return pos + 1, nil
}

// members reads an object's members from in[pos] up to its '}', whose
// position it returns: it writes each to the output and records it in
// c.mem, or leaves it out if exclude names it. The loop's state is in
// locals (st is filled in at the end): this is the hot path.
func (c *canonicalizer) members(st *objState, pos int, mask uint64, pdepth int) (int, error) {
	in := c.in
	sc, shapeOff := c.cachedShape()
	sorted, allVerb := true, true
	count, commaPos := 0, 0
	var prev []byte // the previous member's key
	for {
		if pos < len(in) && in[pos] != '"' {
			pos = skipWS(in, pos)
		}
		if pos >= len(in) || in[pos] != '"' {
			return pos, errNotJSON
		}
		kq := pos
		end, ks, ke, esc, fast, err := c.memberKey(sc, shapeOff, count, kq)
		if err != nil {
			return end, err
		}
		if fast && shapeOff < 0 {
			shapeOff = 0 // the depth's other shape was swapped in
		}
		key := in[ks:ke]
		if esc {
			key = c.keys[ks:ke]
		}
		pos = end
		if pos < len(in) && in[pos] != ':' {
			pos = skipWS(in, pos)
		}
		if pos >= len(in) || in[pos] != ':' {
			return pos, errNotJSON
		}
		pos++
		var child uint64
		skip := false
		if mask != 0 {
			if child, skip, err = c.excludeMember(st, mask, pdepth, key, ks, ke, esc); err != nil {
				return pos, err
			}
		}
		comma := 0
		if count > 0 {
			comma = 1
			c.verbatim(commaPos, commaPos+1)
		}
		os := c.olen()
		verb := !esc && end+1 == pos
		if verb {
			c.verbatim(kq, pos) // compact "key":
		} else {
			c.writeKey(kq, end, pos, ks, ke, esc)
		}
		flushes := c.flushes
		differs, differs2 := c.v1differs, c.v2differs
		if pos, err = c.inlineValue(pos, child, pdepth+1); err != nil {
			return pos, err
		}
		if skip {
			c.v1differs, c.v2differs = differs, differs2 // only what is hashed counts
			c.flush()
			c.out = c.out[:os-comma]
		} else {
			// No flush since the compact key: the member's output is the
			// contiguous input in[kq:pos].
			verb = verb && flushes == c.flushes
			allVerb = allVerb && verb
			if count > 0 && sorted {
				var cmp int
				if len(prev) > 0 && len(key) > 0 && prev[0] != key[0] && prev[0] < 0x80 && key[0] < 0x80 {
					cmp = int(prev[0]) - int(key[0])
				} else {
					cmp = compareUTF16(prev, key)
				}
				if cmp == 0 {
					return pos, errNotJSON // duplicate key
				}
				sorted = cmp < 0
			}
			prev = key
			shapeOff = followShape(sc, shapeOff, key, fast)
			c.addMember(kq, pos, ks, ke, os, esc, verb)
			count++
		}
		pos = skipWS(in, pos)
		if pos >= len(in) {
			return pos, errNotJSON
		}
		if in[pos] != ',' {
			break
		}
		commaPos = pos
		pos++
	}
	if in[pos] != '}' {
		return pos, errNotJSON
	}
	st.sc, st.shapeOff, st.sorted, st.allVerb, st.count = sc, shapeOff, sorted, allVerb, count
	return pos, nil
}

// cachedShape returns the cached shape for this depth, if any, and the
// offset of its first key (-1: no shape to follow).
func (c *canonicalizer) cachedShape() (*objShape, int) {
	if c.depth >= len(c.shapes) {
		return nil, -1
	}
	sc := &c.shapes[c.depth]
	if len(sc.perm) > 0 {
		return sc, 0
	}
	return sc, -1
}

// memberKey reads the member name whose opening quote is at in[kq], the
// count'th member kept, matching it against the cached shape sc (followed
// up to shapeOff) or, for the first one, the depth's other shape. It
// returns the position after the closing quote (on error, the position
// to report) and the key bytes: c.keys[ks:ke] if esc (it had escapes and
// was unescaped), else in[ks:ke]. fast: the key is the next key of the
// cached shape.
func (c *canonicalizer) memberKey(sc *objShape, shapeOff, count, kq int) (end, ks, ke int, esc, fast bool, err error) {
	in := c.in
	if sc != nil && kq+17 <= len(in) {
		if shapeOff >= 0 && count < len(sc.kw) && sc.kw[count].matches(in, kq) {
			end, fast = kq+int(sc.kw[count].n), true // after `key"`, at the colon
		} else if count == 0 && c.fold {
			end, fast = c.altShapeKey(kq)
		}
	}
	if !fast && kq+17 <= len(in) { // see strStops
		off, m := kq+1, strStops(binary.LittleEndian.Uint64(in[kq+1:]))
		if m == 0 {
			off, m = kq+9, strStops(binary.LittleEndian.Uint64(in[kq+9:]))
		}
		if i := off + bits.TrailingZeros64(m)>>3; m != 0 && in[i] == '"' {
			end = i + 1
		}
	}
	if end == 0 {
		end, ks, ke, esc, err = c.scanKey(kq)
		return end, ks, ke, esc, false, err
	}
	return end, kq + 1, end - 1, false, fast, nil
}

// scanKey reads the member name at in[kq] the slow way, unescaping it
// into c.keys if it has escapes; its results are memberKey's.
func (c *canonicalizer) scanKey(kq int) (end, ks, ke int, esc bool, err error) {
	in := c.in
	if end, esc, err = scanString(in, kq); err != nil {
		return end, 0, 0, false, err
	}
	if !esc {
		return end, kq + 1, end - 1, false, nil
	}
	ks = len(c.keys)
	if c.keys, err = unescapeJSON(c.keys, in[kq+1:end-1], false); err != nil {
		return end, 0, 0, true, err
	}
	return end, ks, len(c.keys), true, nil
}

// altShapeKey checks whether the first name, at in[kq], is the first key
// of the depth's other shape; if so it swaps that shape in and returns
// the position after the closing quote and true.
func (c *canonicalizer) altShapeKey(kq int) (int, bool) {
	alt := &c.alts[c.depth]
	if len(alt.perm) == 0 || !alt.kw[0].matches(c.in, kq) {
		return 0, false
	}
	// The first key is that of the depth's other shape: swap it in.
	c.swapAltShape()
	return kq + int(c.shapes[c.depth].kw[0].n), true
}

// swapAltShape swaps the cached shape for this depth with the depth's
// other one.
func (c *canonicalizer) swapAltShape() {
	c.shapes[c.depth], c.alts[c.depth] = c.alts[c.depth], c.shapes[c.depth]
}

// excludeMember follows the exclude pointers in mask into the member
// named key (c.keys[ks:ke] if esc, else in[ks:ke]): it returns those that
// go on into its value, and whether the member itself is left out.
func (c *canonicalizer) excludeMember(st *objState, mask uint64, pdepth int, key []byte, ks, ke int, esc bool) (uint64, bool, error) {
	child, skip := c.exclStep(mask, pdepth, key)
	if skip && c.fold {
		// Left out or not, which of two folded-equal names a struct
		// field gets depends on their order: a left-out name is checked
		// too (the others are, at the end, from c.mem).
		if err := c.addFold(st.foldBase, &st.bloom, key, ks, ke, esc); err != nil {
			return child, skip, err
		}
		st.skipped = true
	}
	return child, skip, nil
}

// writeKey writes the key at in[kq:end] and the colon at in[pos-1], when
// they are not the compact input "key": (escapes or whitespace).
func (c *canonicalizer) writeKey(kq, end, pos, ks, ke int, esc bool) {
	if esc {
		c.flush()
		c.out = appendCanonString(c.out, c.keys[ks:ke])
		c.out = append(c.out, ':')
		return
	}
	c.verbatim(kq, end)
	c.verbatim(pos-1, pos)
}

// addMember records in c.mem the member in[kq:pos], with key bytes ks:ke
// (in c.keys if arena), written to the output from os.
func (c *canonicalizer) addMember(kq, pos, ks, ke, os int, arena, verb bool) {
	n := len(c.mem)
	if n < cap(c.mem) {
		c.mem = c.mem[:n+1]
	} else {
		c.mem = append(c.mem, jsonMember{})
	}
	mp := &c.mem[n]
	mp.ks, mp.ke, mp.os, mp.oe = int32(ks), int32(ke), int32(os), int32(c.olen())
	mp.is, mp.ie, mp.verb = int32(kq), int32(pos), verb
	mp.arena = arena
}

// followShape returns the offset in sc.keys after key if key is the next
// key of the cached shape (fast: already matched), else -1.
func followShape(sc *objShape, shapeOff int, key []byte, fast bool) int {
	if shapeOff < 0 {
		return -1
	}
	if fast {
		return shapeOff + len(key) + 1
	}
	if e := shapeOff + len(key); e < len(sc.keys) && sc.keys[e] == 0xff && string(sc.keys[shapeOff:e]) == string(key) {
		return e + 1
	}
	return -1
}

// endObject, at the object's '}' (in[pos]), runs the fold check on its
// names and writes its members in sorted order.
func (c *canonicalizer) endObject(st *objState, pos int) error {
	sc := st.sc
	// hit: the same keys in the same order as the cached shape.
	hit := st.shapeOff >= 0 && st.shapeOff == len(sc.keys) && st.count == len(sc.perm)
	if c.fold {
		if err := c.checkObjectFolds(st, hit); err != nil {
			return err
		}
	}
	if !st.sorted {
		return c.sortObject(st, hit, pos)
	}
	if c.fold && sc != nil && !hit && st.count > 1 {
		c.cacheSortedShape(st)
	}
	return nil
}

// checkObjectFolds refuses (errFoldedDuplicate) an object with two names,
// left-out ones included, equal under encoding/json's case folding.
func (c *canonicalizer) checkObjectFolds(st *objState, hit bool) error {
	// A shape that passed the fold check passes it again.
	if !hit || !st.sc.foldOK || st.skipped {
		for i := st.base; i < len(c.mem); i++ {
			m := &c.mem[i]
			if err := c.addFold(st.foldBase, &st.bloom, c.keyBytes(m), int(m.ks), int(m.ke), m.arena); err != nil {
				return err
			}
		}
	}
	return c.endFolds(st.foldBase)
}

// sortObject rewrites the members of an object that is not in order
// (its '}' at in[pos]) in sorted order.
func (c *canonicalizer) sortObject(st *objState, hit bool, pos int) error {
	ms := c.mem[st.base:]
	var perm []int32 // nil: ms itself is sorted
	if hit {
		// The same keys in the same order as the cached shape (whose
		// keys were checked for duplicates when it was cached).
		perm = st.sc.perm
	} else if err := c.sortNewShape(st, ms); err != nil {
		return err
	}
	if st.allVerb {
		c.writeSortedFromInput(ms, perm, st.objStart)
	} else {
		c.writeSortedFromOutput(ms, perm, st.objStart)
	}
	c.vs, c.ve = pos, pos
	return nil
}

// sortNewShape sorts ms, refusing duplicate keys, and caches the object's
// shape for this depth: its keys in document order and the permutation
// that sorts them.
func (c *canonicalizer) sortNewShape(st *objState, ms []jsonMember) error {
	sc := st.sc
	if sc != nil {
		if c.fold {
			// Keep the shape this one replaces as the other one.
			c.swapAltShape()
		}
		c.cacheShapeKeys(sc, ms)
		for i := range ms {
			ms[i].idx = int32(i)
		}
	}
	c.sortMembers(ms)
	for i := 1; i < len(ms); i++ {
		if c.cmpMember(&ms[i-1], &ms[i]) == 0 {
			if sc != nil {
				sc.perm = sc.perm[:0]
				sc.keys = sc.keys[:0]
			}
			return errNotJSON
		}
	}
	if sc != nil {
		sc.perm = sc.perm[:0]
		for i := range ms {
			sc.perm = append(sc.perm, ms[i].idx)
		}
		sc.foldOK = c.fold && !st.skipped
	}
	return nil
}

// cacheSortedShape caches the shape of a sorted object too (identity
// order), for the fold check: an array of same-shaped sorted records
// checks its names once.
func (c *canonicalizer) cacheSortedShape(st *objState) {
	sc := st.sc
	c.swapAltShape()
	ms := c.mem[st.base:]
	c.cacheShapeKeys(sc, ms)
	sc.perm = sc.perm[:0]
	for i := range ms {
		sc.perm = append(sc.perm, int32(i))
	}
	sc.foldOK = !st.skipped
}

// cacheShapeKeys sets sc's keys, and their compact input forms, to those
// of ms in document order.
func (c *canonicalizer) cacheShapeKeys(sc *objShape, ms []jsonMember) {
	sc.keys, sc.kw = sc.keys[:0], sc.kw[:0]
	for i := range ms {
		k := c.keyBytes(&ms[i])
		sc.keys = append(sc.keys, k...)
		sc.keys = append(sc.keys, 0xff)
		sc.kw = append(sc.kw, makeKeyWords(k))
	}
}

// writeSortedFromInput replaces the object's members in the output (from
// objStart), all of them verbatim, with their input text in sorted order
// (perm, or ms's own order if nil).
func (c *canonicalizer) writeSortedFromInput(ms []jsonMember, perm []int32, objStart int) {
	// Drop the members from the output and copy them from the
	// input in sorted order.
	if d := c.olen() - objStart; d <= c.ve-c.vs {
		c.ve -= d
	} else {
		c.ve = c.vs
		c.out = c.out[:objStart]
	}
	c.flush()
	in := c.in
	for i := range ms {
		m := &ms[i]
		if perm != nil {
			m = &ms[perm[i]]
		}
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, in[m.is:m.ie]...)
	}
}

// writeSortedFromOutput reorders the object's members in the output (from
// objStart) into sorted order (perm, or ms's own order if nil), through
// c.scratch.
func (c *canonicalizer) writeSortedFromOutput(ms []jsonMember, perm []int32, objStart int) {
	c.flush()
	c.scratch = append(c.scratch[:0], c.out[objStart:]...)
	out := c.out
	o := objStart
	for i := range ms {
		m := &ms[i]
		if perm != nil {
			m = &ms[perm[i]]
		}
		if i > 0 {
			out[o] = ','
			o++
		}
		o += copy(out[o:], c.scratch[int(m.os)-objStart:int(m.oe)-objStart])
	}
	c.out = out[:o]
}

// exclStep follows the exclude pointers active in mask (those whose first
// pdepth tokens matched) into the member or element named key.
func (c *canonicalizer) exclStep(mask uint64, pdepth int, key []byte) (uint64, bool) {
	var child uint64
	skip := false
	for i, toks := range c.excl {
		if mask&(1<<uint(i)) == 0 || len(toks) <= pdepth || toks[pdepth] != string(key) {
			continue
		}
		if len(toks) == pdepth+1 {
			skip = true
		} else {
			child |= 1 << uint(i)
		}
	}
	return child, skip
}

func (c *canonicalizer) array(pos int, mask uint64, pdepth int) (int, error) {
	c.depth++
	if c.depth > maxJSONDepth {
		return pos, errNotJSON
	}
	in := c.in
	c.verbatim(pos, pos+1) // '['
	pos++
	pos = skipWS(in, pos)
	if pos < len(in) && in[pos] == ']' {
		c.verbatim(pos, pos+1)
		c.depth--
		return pos + 1, nil
	}
	count := 0
	commaPos := 0
	for idx := 0; ; idx++ {
		var child uint64
		skip := false
		if mask != 0 {
			var nb [20]byte
			child, skip = c.exclStep(mask, pdepth, strconv.AppendInt(nb[:0], int64(idx), 10))
		}
		mark := c.olen()
		if count > 0 {
			c.verbatim(commaPos, commaPos+1)
		}
		var err error
		differs, differs2 := c.v1differs, c.v2differs
		pos, err = c.inlineValue(pos, child, pdepth+1)
		if err != nil {
			return pos, err
		}
		if skip {
			c.v1differs, c.v2differs = differs, differs2 // only what is hashed counts
			c.flush()
			c.out = c.out[:mark]
		} else {
			count++
		}
		pos = skipWS(in, pos)
		if pos >= len(in) {
			return pos, errNotJSON
		}
		if in[pos] == ',' {
			commaPos = pos
			pos++
			continue
		}
		if in[pos] != ']' {
			return pos, errNotJSON
		}
		c.verbatim(pos, pos+1)
		c.depth--
		return pos + 1, nil
	}
}

// compareUTF16 compares two UTF-8 strings by their UTF-16 code units, as
// RFC 8785 sorts object keys.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < 0x80 && b[i] < 0x80 {
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the differing rune.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	a, b = a[i:], b[i:]
	for len(a) > 0 && len(b) > 0 {
		ra, sa := utf8.DecodeRune(a)
		rb, sb := utf8.DecodeRune(b)
		if ra != rb {
			ua, ub := utf16Key(ra), utf16Key(rb)
			if ua != ub {
				if ua < ub {
					return -1
				}
				return 1
			}
		}
		a, b = a[sa:], b[sb:]
	}
	return len(a) - len(b)
}

// utf16Key maps a rune to a value that orders like its UTF-16 encoding:
// supplementary characters (surrogate pairs 0xD800-0xDBFF...) sort between
// U+D7FF and U+E000.
func utf16Key(r rune) uint64 {
	if r < 0x10000 {
		return uint64(r) << 16
	}
	r1, r2 := utf16.EncodeRune(r)
	return uint64(r1)<<16 | uint64(r2)
}
