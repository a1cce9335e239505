package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
)

// MaxKeyLength is the longest key accepted (CONTRACT §2).
const MaxKeyLength = 255

// Key errors returned by parseKey; the 400 problem's detail carries their text.
var (
	errKeyEmpty    = errors.New("idempotency key is empty")
	errKeyTooLong  = errors.New("idempotency key is longer than 255 characters")
	errKeyInvalid  = errors.New("idempotency key has characters outside visible ASCII (0x21-0x7E)")
	errKeyBadQuote = errors.New("idempotency key starts with a quote but is not a valid RFC 8941 string")
)

// parseKey validates a client-supplied key: 1 to 255 visible ASCII
// characters (0x21-0x7E). The RFC 8941 quoted form ("abc", with \" and \\
// escapes) is accepted and unquoted first; the unquoted key must then be
// 1 to 255 visible ASCII characters too (so a space is refused even inside
// quotes). A key that starts with a double quote must be a valid quoted
// string.
func parseKey(s string) (string, error) {
	if len(s) > 0 && s[0] == '"' {
		u, err := unquoteSFString(s)
		if err != nil {
			return "", err
		}
		s = u
	}
	if s == "" {
		return "", errKeyEmpty
	}
	if len(s) > MaxKeyLength {
		return "", errKeyTooLong
	}
	if !visibleASCII(s) {
		return "", errKeyInvalid
	}
	return s, nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// unquoteSFString parses an RFC 8941 sf-string.
func unquoteSFString(s string) (string, error) {
	if len(s) < 2 || s[len(s)-1] != '"' {
		return "", errKeyBadQuote
	}
	in := s[1 : len(s)-1]
	if strings.IndexByte(in, '\\') < 0 {
		for i := 0; i < len(in); i++ {
			if c := in[i]; c == '"' || c < 0x20 || c > 0x7e {
				return "", errKeyBadQuote
			}
		}
		return in, nil
	}
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 >= len(in) || (in[i+1] != '"' && in[i+1] != '\\') {
				return "", errKeyBadQuote
			}
			i++
			b.WriteByte(in[i])
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", errKeyBadQuote
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// HashPrincipal is how a principal is stored: its SHA-256. Stores never
// see the clear value. The anonymous key space uses the zero hash.
func HashPrincipal(principal string) [32]byte {
	return sha256.Sum256([]byte("idemgen-principal\x00" + principal))
}

// KeyDigest is what logs and traces show instead of an idempotency key:
// 128 bits of the key's SHA-256 (domain-separated), in hex. A key from
// fields is a business value (an order id, an amount), and a client's key
// may be one too; the digest still ties together every attempt with one
// key, across processes. It is not a secret: a guessable value (a small
// amount, a sequential id) can be found by hashing candidates, so keep
// traces as private as the data they describe.
func KeyDigest(key string) string {
	sum := sha256.Sum256([]byte("idemgen-key\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// queryValue finds the query parameter name in a raw query. It reports how
// many times the parameter occurs (0, 1, or more).
func queryValue(rawQuery, name string) (string, int) {
	var val string
	n := 0
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			uk, err := url.QueryUnescape(k)
			if err != nil {
				continue
			}
			k = uk
		}
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			uv, err := url.QueryUnescape(v)
			if err != nil {
				// A malformed escape is a malformed key.
				uv = "\x00"
			}
			v = uv
		}
		val = v
		n++
	}
	return val, n
}

// derivedKey turns canonical field values into a stored key:
// scope + ":" + values when that is 1-255 visible ASCII, otherwise
// scope + ":sha256:" + hex(SHA-256(values)), and when even that is too long
// (a very long scope), "sha256:" + hex(SHA-256(scope + ":" + values)).
func derivedKey(scope string, values []byte) string {
	if n := len(scope) + 1 + len(values); n <= MaxKeyLength && visibleASCII(scope) && visibleASCIIBytes(values) {
		return scope + ":" + string(values)
	}
	sum := sha256.Sum256(values)
	if k := scope + ":sha256:" + hex.EncodeToString(sum[:]); len(k) <= MaxKeyLength && visibleASCII(scope) {
		return k
	}
	all := sha256.Sum256(append([]byte(scope+":"), values...))
	return "sha256:" + hex.EncodeToString(all[:])
}

func visibleASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
