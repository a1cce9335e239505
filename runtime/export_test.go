package runtime

import (
	"strings"
)

// What the tests call that the package keeps to itself.
var (
	ParseKey       = parseKey
	ErrKeyEmpty    = errKeyEmpty
	ErrKeyTooLong  = errKeyTooLong
	ErrKeyInvalid  = errKeyInvalid
	ErrKeyBadQuote = errKeyBadQuote
	NewEventID     = newEventID
)

const SealedHeader = sealedHeader

// CanonicalJSON returns the RFC 8785 (JCS) canonical form of a JSON
// document: object members sorted by their UTF-16 code units, no
// insignificant whitespace, strings with minimal escapes, numbers in
// ECMAScript's shortest form.
func CanonicalJSON(in []byte) ([]byte, error) {
	c := &canonicalizer{}
	if err := c.canonicalize(in, nil); err != nil {
		return nil, err
	}
	return c.out, nil
}

// Fingerprint is the fingerprint of version FingerprintVersion of a
// request without Content-Encoding (fingerprintAt).
func Fingerprint(method, route string, params []string, contentType string, body []byte, include, exclude []string) ([32]byte, error) {
	return fingerprintAt(FingerprintVersion, method, route, params, contentType, nil, body, include, exclude)
}

// FingerprintEncoded is Fingerprint for a request with the Content-Encoding
// header values contentEncoding.
func FingerprintEncoded(method, route string, params []string, contentType string, contentEncoding []string, body []byte, include, exclude []string) ([32]byte, error) {
	return fingerprintAt(FingerprintVersion, method, route, params, contentType, contentEncoding, body, include, exclude)
}

// FingerprintEncodedAt is FingerprintEncoded with the algorithm of
// another version (3 or later: earlier ones ignore the encoding).
func FingerprintEncodedAt(version int, method, route string, params []string, contentType string, contentEncoding []string, body []byte, include, exclude []string) ([32]byte, error) {
	return fingerprintAt(version, method, route, params, contentType, contentEncoding, body, include, exclude)
}

// FingerprintAt is Fingerprint with the algorithm of another version (1, 2
// or 3), for tests of records written by earlier versions.
func FingerprintAt(version int, method, route string, params []string, contentType string, body []byte, include, exclude []string) ([32]byte, error) {
	return fingerprintAt(version, method, route, params, contentType, nil, body, include, exclude)
}

// CanonicalExact is CanonicalJSON with exact numbers: the JSON text that a
// version 2 fingerprint hashes.
func CanonicalExact(in []byte) ([]byte, error) {
	c := &canonicalizer{exact: true}
	if err := c.canonicalize(in, nil); err != nil {
		return nil, err
	}
	return c.out, nil
}

// CanonicalV3 is the JSON text that a version 3 fingerprint hashes:
// CanonicalExact with numbers as written and folded-equal names refused.
func CanonicalV3(in []byte) ([]byte, error) {
	c := &canonicalizer{exact: true, verbNum: true, fold: true}
	if err := c.canonicalize(in, nil); err != nil {
		return nil, err
	}
	return c.out, nil
}

// FieldsKey is the key that a fields-keyed operation of scope derives from
// body (fields: dotted paths, as Policy.KeyFields).
func FieldsKey(scope string, body []byte, fields ...string) (string, bool) {
	var toks [][]string
	for _, f := range fields {
		toks = append(toks, strings.Split(f, "."))
	}
	vals, ok := fieldsKeyValues(&canonicalizer{}, nil, body, toks)
	if !ok {
		return "", false
	}
	return derivedKey(scope, vals), true
}
