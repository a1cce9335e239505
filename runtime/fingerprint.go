package runtime

import (
	"crypto/sha256"
	"encoding/binary"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/idemgen/idemgen/internal/jsonnames"
	"github.com/idemgen/idemgen/internal/policysyntax"
)

// FingerprintVersion is the version of the fingerprint algorithm that this
// runtime writes with each record. Records written by versions 1 and 2 are
// still compared with their own version's algorithm (so an upgrade turns no
// retry into a 422 and replays no other request); a record written by a
// version this runtime does not know (a newer one, during a rolling
// upgrade) is not compared: it is accepted rather than refused.
//
// Version 2 (see docs/contract.md, "Fingerprint versions"): numbers are
// exact decimals, not float64 values; the repeated values of a query or
// form parameter keep their order; a form body that is not strictly
// urlencoded is hashed as raw bytes.
//
// Version 3: a number keeps the text it is written in (encoding/json tells
// 100 from 1e2 and 100.0); an object with two member names equal under
// encoding/json's case folding ("amount" and "Amount") is hashed as raw
// bytes, as one with an exact duplicate is; a request with a
// Content-Encoding header counts it, and its body as raw bytes.
//
// Version 4: an include pointer's token reaches a member whose name equals
// it under encoding/json's case folding, as a struct field does (/amount
// selects "Amount" when the body has no "amount"), hashed with a mark of
// its own; version 3 hashed such a value as absent, so that two requests
// that differ there (the amount a handler charges) shared a fingerprint.
const FingerprintVersion = 4

// Body kinds, hashed before the body so that a JSON body and a raw body with
// the same bytes never collide.
const (
	bodyRaw  = 'r'
	bodyJSON = 'j'
	bodyForm = 'f'
	bodyIncl = 'i'
	// querySec starts the query section, present only when the request has
	// query parameters besides a query-sourced key; it differs from every
	// body marker, so a request without a query hashes as it always did.
	querySec = 'q'
	// encodingSec starts the Content-Encoding section (version 3), present
	// only when the request has the header.
	encodingSec = 'e'
)

var canonPool = sync.Pool{New: func() any { return &canonicalizer{} }}

func getCanon() *canonicalizer { return canonPool.Get().(*canonicalizer) }

func putCanon(c *canonicalizer) {
	if cap(c.out) > 1<<20 || cap(c.scratch) > 1<<20 || cap(c.digits) > 1<<20 || cap(c.v1num) > 1<<20 || cap(c.pbuf) > 1<<20 ||
		cap(c.ntext) > 1<<20 || cap(c.fbuf) > 1<<20 || cap(c.folds) > 1<<16 {
		return // do not keep huge buffers alive
	}
	c.in = nil
	canonPool.Put(c)
}

func appendLenString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// fingerprintAt computes a request's fingerprint with the algorithm of
// version (the engine's is FingerprintVersion): SHA-256 over the method,
// the route template, the path parameter values, the Content-Encoding
// header values encoding (version 3) and the body. A JSON body (Content-Type
// application/json or any +json type) is canonicalised as RFC 8785 orders
// members and escapes strings, numbers kept as written, keeping only the
// include pointers or leaving out the exclude pointers; an
// application/x-www-form-urlencoded body is hashed as its pairs (names
// sorted, the values of one name in their order); anything else
// (including JSON that cannot be canonicalised or has member names equal
// under encoding/json's case folding, and forms that are not strictly
// urlencoded) as raw bytes. With an encoding, the body counts as raw
// bytes: what a handler reads is what its decompression makes of them.
func fingerprintAt(version int, method, route string, params []string, contentType string, encoding []string, body []byte, include, exclude []string) ([32]byte, error) {
	in := fpInput{method: method, route: route, params: params, contentType: contentType, encoding: encoding, include: include}
	var exc [][]string
	for _, p := range include {
		t, err := policysyntax.SplitPointer(p)
		if err != nil {
			return [32]byte{}, err
		}
		in.inc = append(in.inc, t)
	}
	for _, p := range exclude {
		t, err := policysyntax.SplitPointer(p)
		if err != nil {
			return [32]byte{}, err
		}
		exc = append(exc, t)
	}
	c := getCanon()
	defer putCanon(c)
	return c.fingerprint(version, &in, body, exc), nil
}

// fpInput is what a request's fingerprint is computed from besides the
// body and the exclude pointers (which the canonicaliser holds on to, and
// so are passed apart: the path parameters, often in a caller's stack
// array, stay there), kept so that a record written by version 1 can be
// compared with version 1's algorithm.
type fpInput struct {
	method, route string
	params        []string
	// rawQuery is the request's raw query: its pairs count too (less the
	// parameter skipKey, a query-sourced key), so that "?dry_run=true"
	// under a reused key is a mismatch, not a replay of the real run.
	rawQuery, skipKey string
	contentType       string
	// encoding is the request's Content-Encoding header values (version
	// 3; earlier versions ignore it).
	encoding []string
	include  []string
	inc      [][]string
}

// fingerprintDiffers reports whether an existing record's fingerprint
// belongs to another request than the one that computed fp (version
// FingerprintVersion) from in, body and exc.
func fingerprintDiffers(res *ClaimResult, fp [32]byte, in *fpInput, body []byte, exc [][]string) bool {
	switch res.FingerprintVersion {
	case FingerprintVersion:
		return res.Fingerprint != fp
	case 1, 2, 3:
		if res.Fingerprint == fp {
			// The current version hashed the older version's form under
			// its header (see fingerprint): the same request, no second
			// pass.
			return false
		}
		c := getCanon()
		old := c.fingerprint(res.FingerprintVersion, in, body, exc)
		putCanon(c)
		return res.Fingerprint != old
	}
	// A version this runtime does not know is not comparable: accepted
	// rather than refused.
	return false
}

// fingerprint computes the fingerprint of in with the algorithm of version
// (1 to 4).
//
// Each version hashes what the version before it would whenever the two
// canonical forms agree (every ordinary request), under that version's
// header, so that its fingerprint, and a body-derived key, is the older
// one: version 2 hashes version 1's form under version 1's header when the
// forms agree (numbers whose decimal value is that of their shortest
// double, one value per query or form name or values in sorted order), and
// version 3 hashes version 2's (with version 2's choice of header) when
// every hashed number is written as its exact canonical text, no object
// has folded-equal names and there is no Content-Encoding, and version 4
// hashes version 3's (with its choice of header) unless an include token
// reached a member only by folding. Where they part
// (where the older version merged requests that differ), it hashes its own
// form under its own header. Equal fingerprints still mean equal forms of
// the newest version: the hashed form is always the newest version's, and
// which header is used depends only on that form (never on excluded
// members), so equal forms get equal fingerprints.
func (c *canonicalizer) fingerprint(version int, in *fpInput, body []byte, exc [][]string) [32]byte {
	c.exact, c.verbNum, c.fold = version >= 2, version >= 3, version >= 3
	c.v1differs, c.v2differs, c.v3differs = false, false, false
	c.foldPtr = version >= 4
	hdr := append(c.out[:0], "idemgen-fp\x00"...)
	verAt := len(hdr)
	hdr = strconv.AppendInt(hdr, int64(version), 10)
	hdr = appendLenString(hdr, in.method)
	hdr = appendLenString(hdr, in.route)
	hdr = binary.AppendUvarint(hdr, uint64(len(in.params)))
	for _, p := range in.params {
		hdr = appendLenString(hdr, p)
	}
	c.out = hdr
	same := true  // version 2's form is version 1's so far
	same2 := true // version 3's form is version 2's so far
	if in.rawQuery != "" {
		if version >= 2 {
			same = c.appendQueryV2(in.rawQuery, in.skipKey)
		} else {
			c.appendQuery(in.rawQuery, in.skipKey)
		}
	}
	kind := mediaKind(in.contentType)
	if version >= 3 && in.encoding != nil {
		c.out = append(c.out, encodingSec)
		c.out = binary.AppendUvarint(c.out, uint64(len(in.encoding)))
		for _, e := range in.encoding {
			c.out = appendLenString(c.out, e)
		}
		kind, same2 = bodyRaw, false
	}
	n := len(c.out)
	done := false
	switch kind {
	case bodyJSON:
		var err error
		if len(in.inc) > 0 {
			err = c.includeJSON(body, in.include, in.inc)
		} else {
			c.out = append(c.out, bodyJSON)
			err = c.canonicalize(body, exc)
		}
		done = err == nil
		// JSON that version 2 refuses, version 1 refuses too: both hash it
		// raw. Version 3 refuses folded-equal names, which version 2 took.
		same = same && (!done || !c.v1differs)
		same2 = same2 && (!done || !c.v2differs) && err != errFoldedDuplicate
	case bodyForm:
		c.out = append(c.out, bodyForm)
		if version >= 2 {
			var formSame bool
			done, formSame = c.appendFormV2(body)
			same = same && formSame
		} else {
			done = c.appendForm(body) == nil
		}
	}
	if !done {
		c.out = append(c.out[:n], bodyRaw)
		c.out = append(c.out, body...)
	}
	switch {
	case version >= 4 && c.v3differs:
	case version >= 3 && !same2:
		c.out[verAt] = '3'
	case version >= 2 && same:
		c.out[verAt] = '1'
	case version >= 3:
		c.out[verAt] = '2'
	}
	return sha256.Sum256(c.out)
}

// includeJSON appends, for each include pointer (sorted), the pointer and
// the canonical value it selects (or an absent marker).
func (c *canonicalizer) includeJSON(body []byte, include []string, inc [][]string) error {
	// Validate the whole document first, so that invalid JSON is hashed raw
	// whatever part of it the pointers select.
	mark := len(c.out)
	if err := c.canonicalize(body, nil); err != nil {
		return err
	}
	c.v1differs, c.v2differs = false, false // only the included values count
	c.out = append(c.out[:mark], bodyIncl)
	for i, toks := range inc {
		c.out = appendLenString(c.out, include[i])
		start, ok := findJSON(body, toks)
		if !ok && c.foldPtr {
			// encoding/json gives a struct field the member whose name
			// folds to its tag's when none has it exactly (at most one
			// does: the canonicaliser refused folded-equal names).
			if start, ok = c.findJSONFolded(body, toks); ok {
				c.v3differs = true
				c.out = append(c.out, 2)
			}
		} else if ok {
			c.out = append(c.out, 1)
		}
		if !ok {
			c.out = append(c.out, 0)
			continue
		}
		c.in = body
		c.depth = 0
		if _, err := c.value(start, 0, 0); err != nil {
			return err
		}
		c.out = append(c.out, 0xff)
	}
	return nil
}

func (c *canonicalizer) appendForm(body []byte) error {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return err
	}
	c.appendPairs(vals)
	return nil
}

// appendQuery appends version 1's query section: the sorted pairs of
// rawQuery without skipKey, nothing when none remain, or the raw query
// when it does not parse.
func (c *canonicalizer) appendQuery(rawQuery, skipKey string) {
	// A copy: the parsed values alias their input, and the request's query
	// must not escape with them (nor the rest of fpInput with it).
	vals, err := url.ParseQuery(strings.Clone(rawQuery))
	if err != nil {
		c.out = append(c.out, querySec, bodyRaw)
		c.out = appendLenString(c.out, rawQuery)
		return
	}
	if skipKey != "" {
		delete(vals, skipKey)
	}
	if len(vals) == 0 {
		return
	}
	pairs := 0
	for _, vs := range vals {
		pairs += len(vs)
	}
	c.out = append(c.out, querySec)
	c.out = binary.AppendUvarint(c.out, uint64(pairs))
	c.appendPairs(vals)
}

// appendPairs appends every (name, value) pair of vals, sorted by name,
// then value (version 1: the order of repeated values is lost, fixed in
// version 2).
func (c *canonicalizer) appendPairs(vals url.Values) {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := slices.Clone(vals[k])
		slices.Sort(vs)
		for _, v := range vs {
			c.out = appendLenString(c.out, k)
			c.out = appendLenString(c.out, v)
		}
	}
}

// mediaKind classifies a Content-Type without allocating.
func mediaKind(ct string) byte {
	if ct == "application/json" {
		return bodyJSON // the common spelling, without the folding below
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "application/json"):
		return bodyJSON
	case len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json") && strings.IndexByte(ct, '/') > 0:
		return bodyJSON
	case strings.EqualFold(ct, "application/x-www-form-urlencoded"):
		return bodyForm
	}
	return bodyRaw
}

// findJSON returns the offset of the value that the pointer tokens select
// in a valid JSON document.
func findJSON(in []byte, toks []string) (int, bool) { return findJSONBy(in, toks, nil) }

// findJSONFolded is findJSON with each token matching a member whose name
// equals it under encoding/json's case folding.
func (c *canonicalizer) findJSONFolded(in []byte, toks []string) (int, bool) {
	return findJSONBy(in, toks, c)
}

// foldEqual reports whether encoding/json folds key and tok alike.
func (c *canonicalizer) foldEqual(key []byte, tok string) bool {
	f := jsonnames.AppendFolded(c.fbuf[:0], key)
	n := len(f)
	f = jsonnames.AppendFolded(f, []byte(tok))
	c.fbuf = f
	return string(f[:n]) == string(f[n:])
}

// findJSONBy is findJSON, matching names by their folded forms when fold
// is not nil.
func findJSONBy(in []byte, toks []string, fold *canonicalizer) (int, bool) {
	pos := skipWS(in, 0)
	var kb []byte
	for _, tok := range toks {
		if pos >= len(in) {
			return 0, false
		}
		switch in[pos] {
		case '{':
			pos = skipWS(in, pos+1)
			found := false
			for pos < len(in) && in[pos] == '"' {
				end, esc, err := scanString(in, pos)
				if err != nil {
					return 0, false
				}
				key := in[pos+1 : end-1]
				if esc {
					kb, err = unescapeJSON(kb[:0], key, false)
					if err != nil {
						return 0, false
					}
					key = kb
				}
				pos = skipWS(in, end)
				pos = skipWS(in, pos+1) // ':'
				if string(key) == tok || (fold != nil && fold.foldEqual(key, tok)) {
					found = true
					break
				}
				if pos, err = skipJSON(in, pos); err != nil {
					return 0, false
				}
				pos = skipWS(in, pos)
				if pos < len(in) && in[pos] == ',' {
					pos = skipWS(in, pos+1)
				}
			}
			if !found {
				return 0, false
			}
		case '[':
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || (len(tok) > 1 && tok[0] == '0') {
				return 0, false
			}
			pos = skipWS(in, pos+1)
			for i := 0; ; i++ {
				if pos >= len(in) || in[pos] == ']' {
					return 0, false
				}
				if i == idx {
					break
				}
				if pos, err = skipJSON(in, pos); err != nil {
					return 0, false
				}
				pos = skipWS(in, pos)
				if pos < len(in) && in[pos] == ',' {
					pos = skipWS(in, pos+1)
				}
			}
		default:
			return 0, false
		}
	}
	return pos, true
}

// skipJSON returns the offset after the value at pos (the document is
// known to be valid).
func skipJSON(in []byte, pos int) (int, error) {
	if pos >= len(in) {
		return pos, errNotJSON
	}
	switch in[pos] {
	case '"':
		end, _, err := scanString(in, pos)
		return end, err
	case '{', '[':
		depth := 0
		for pos < len(in) {
			switch in[pos] {
			case '"':
				end, _, err := scanString(in, pos)
				if err != nil {
					return end, err
				}
				pos = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return pos + 1, nil
				}
			}
			pos++
		}
		return pos, errNotJSON
	default:
		for pos < len(in) {
			switch in[pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return pos, nil
			}
			pos++
		}
		return pos, nil
	}
}

// fieldsKeyValues appends the canonical values of the key fields, joined by
// ",", to dst. ok is false when the body is not JSON or a field is absent
// or null.
func fieldsKeyValues(c *canonicalizer, dst []byte, body []byte, fields [][]string) ([]byte, bool) {
	// Exact numbers (the key is the value: 5, 5.0 and 5e0 are one key, and
	// the fingerprint, which keeps the text, tells them apart); folded-equal
	// names refused (the key would be one value, a struct field the other).
	c.exact, c.verbNum, c.fold = true, false, true
	// Validate (and canonicalise) once; then pick the fields.
	mark := len(c.out)
	if err := c.canonicalize(body, nil); err != nil {
		c.out = c.out[:mark]
		return dst, false
	}
	c.out = c.out[:mark]
	for i, toks := range fields {
		start, ok := findJSON(body, toks)
		if !ok {
			return dst, false
		}
		start = skipWS(body, start)
		if len(body)-start >= 4 && string(body[start:start+4]) == "null" {
			return dst, false
		}
		c.in, c.depth = body, 0
		vm := len(c.out)
		if _, err := c.value(start, 0, 0); err != nil {
			c.out = c.out[:mark]
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.out[vm:]...)
		c.out = c.out[:mark]
	}
	return dst, true
}
