package runtime

import (
	"bytes"
	"encoding/binary"
	"net/url"
	"slices"
	"strings"
	"unsafe"
)

// Query strings and form bodies (fingerprint version 2).
//
// Their canonical form merges only what every handler reading them through
// net/http (r.URL.Query, r.Form, r.PostForm) reads alike: percent-encoding
// variants of the same bytes ("%61" and "a", "+" and "%20"), empty pieces
// ("a=1&&b=2"), a name without "=" and with an empty value, and the order
// of different names (url.Values is a map). The order of the values of one
// name always counts (?a=1&a=2 is not ?a=2&a=1: FormValue reads the
// first). Text that is not strictly urlencoded is not parsed at all, so a
// JSON or XML body sent with a form content type is hashed as the bytes it
// is, never split at the "&" inside its strings.

// qpair is one decoded pair: name c.pbuf[ns:ne], value c.pbuf[vs:ve].
type qpair struct{ ns, ne, vs, ve int32 }

// formByte marks the bytes a strictly urlencoded text may hold: what an
// application/x-www-form-urlencoded serialiser leaves as it is, the
// separators, percent escapes, and the URL characters that clients commonly
// leave unescaped in values (":/?@!$'()*,[]"). No quotes, braces, spaces,
// ";", "<", or bytes outside ASCII: a JSON object or string, XML or text
// is never strict.
var formByte = func() (t [256]bool) {
	for _, ch := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$'()*+,/:?@[]%=&") {
		t[ch] = true
	}
	return t
}()

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// parsePairs decodes a strictly urlencoded text into c.pairs, leaving out
// the pairs named skip, and orders them by name, keeping the order of the
// values of each name. It reports false when s is not strict (a byte
// outside formByte, a malformed percent escape), and whether version 1's
// sorted pairs are the same (the values of each name are in sorted order).
func (c *canonicalizer) parsePairs(s, skip string) (strict, v1same bool) {
	c.pairs, c.pbuf = c.pairs[:0], c.pbuf[:0]
	for i := 0; i < len(s); i++ {
		if !formByte[s[i]] {
			return false, false
		}
	}
	sorted := true
	for s != "" {
		var seg string
		seg, s, _ = strings.Cut(s, "&")
		if seg == "" {
			continue
		}
		name, val, _ := strings.Cut(seg, "=")
		ns := len(c.pbuf)
		var ok bool
		if c.pbuf, ok = appendFormUnescape(c.pbuf, name); !ok {
			return false, false
		}
		ne := len(c.pbuf)
		if skip != "" && string(c.pbuf[ns:ne]) == skip {
			c.pbuf = c.pbuf[:ns]
			continue
		}
		if c.pbuf, ok = appendFormUnescape(c.pbuf, val); !ok {
			return false, false
		}
		p := qpair{int32(ns), int32(ne), int32(ne), int32(len(c.pbuf))}
		if n := len(c.pairs); n > 0 && bytes.Compare(c.pbuf[c.pairs[n-1].ns:c.pairs[n-1].ne], c.pbuf[ns:ne]) > 0 {
			sorted = false
		}
		c.pairs = append(c.pairs, p)
	}
	buf := c.pbuf
	if !sorted {
		slices.SortStableFunc(c.pairs, func(a, b qpair) int { return bytes.Compare(buf[a.ns:a.ne], buf[b.ns:b.ne]) })
	}
	v1same = true
	for i := 1; i < len(c.pairs); i++ {
		a, b := c.pairs[i-1], c.pairs[i]
		if string(buf[a.ns:a.ne]) == string(buf[b.ns:b.ne]) && string(buf[a.vs:a.ve]) > string(buf[b.vs:b.ve]) {
			v1same = false
			break
		}
	}
	return true, v1same
}

// appendParsedPairs appends each name and value of c.pairs.
func (c *canonicalizer) appendParsedPairs() {
	for _, p := range c.pairs {
		c.out = binary.AppendUvarint(c.out, uint64(p.ne-p.ns))
		c.out = append(c.out, c.pbuf[p.ns:p.ne]...)
		c.out = binary.AppendUvarint(c.out, uint64(p.ve-p.vs))
		c.out = append(c.out, c.pbuf[p.vs:p.ve]...)
	}
}

// appendQueryV2 appends the query section: the count and the pairs of
// rawQuery without skipKey, nothing when none remain, or the raw query when
// it is not strictly urlencoded. It reports whether version 1 appends the
// same.
func (c *canonicalizer) appendQueryV2(rawQuery, skipKey string) bool {
	strict, v1same := c.parsePairs(rawQuery, skipKey)
	if !strict {
		c.out = append(c.out, querySec, bodyRaw)
		c.out = appendLenString(c.out, rawQuery)
		// Does version 1 hash it raw too? (A copy: the parsed values alias
		// their input, which must not escape.)
		_, err := url.ParseQuery(strings.Clone(rawQuery))
		return err != nil
	}
	if len(c.pairs) == 0 {
		return true
	}
	c.out = append(c.out, querySec)
	c.out = binary.AppendUvarint(c.out, uint64(len(c.pairs)))
	c.appendParsedPairs()
	return v1same
}

// appendFormV2 appends the pairs of a form body (the body is last in the
// fingerprint: no count). ok is false when the body is not strictly
// urlencoded (it is then hashed raw); v1same whether version 1 hashes the
// body the same way.
func (c *canonicalizer) appendFormV2(body []byte) (ok, v1same bool) {
	strict, v1same := c.parsePairs(unsafeString(body), "")
	if !strict {
		_, err := url.ParseQuery(string(body))
		return false, err != nil
	}
	c.appendParsedPairs()
	return true, v1same
}

// appendFormUnescape appends s decoded as url.QueryUnescape does ("+" is a
// space); false for a malformed percent escape.
func appendFormUnescape(dst []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '+':
			dst = append(dst, ' ')
		case '%':
			if i+2 >= len(s) {
				return dst, false
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return dst, false
			}
			dst = append(dst, hi<<4|lo)
			i += 2
		default:
			dst = append(dst, ch)
		}
	}
	return dst, true
}

func unhex(ch byte) (byte, bool) {
	switch {
	case '0' <= ch && ch <= '9':
		return ch - '0', true
	case 'a' <= ch && ch <= 'f':
		return ch - 'a' + 10, true
	case 'A' <= ch && ch <= 'F':
		return ch - 'A' + 10, true
	}
	return 0, false
}
