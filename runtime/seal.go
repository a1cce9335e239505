package runtime

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Saved responses at rest (Options.Encryption).
//
// A sealed record keeps its status in clear (operators and hooks read it;
// it is bound into the additional data, so it cannot be changed) and
// replaces its headers and body: the body column holds the envelope
//
//	version (1 byte) | key id length (1 byte) | key id | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// whose plaintext is the replayable headers and the body, and the header
// column holds the single marker ":idemgen-sealed" (sealedHeader), a name
// no handler's response can save (a colon is not allowed in a header
// name), so that a sealed record is never mistaken for a response in
// clear, nor the reverse.
//
// The additional data is the envelope's prefix (version and key id) and the
// record: scope, principal hash, key, epoch and status. A ciphertext copied
// onto another record, or onto the same key after it expired and ran again,
// does not open.
//
// AES-256-GCM rather than XChaCha20-Poly1305: the runtime imports only the
// standard library, and AES-GCM runs on the CPU's AES instructions. Its
// nonce is 96 bits, drawn at random for each record, so one key should
// seal at most 2^32 records (NIST SP 800-38D's bound for random nonces,
// where a repeated nonce has a chance below 2^-32): at 1,000 completions a
// second that is 50 days, so rotate keys well within that. XChaCha20's
// 192-bit nonce has no such bound, at the cost of a dependency.

// sealedHeader is the header name that marks a sealed record in a store
// (IsSealed tells a sealed record from one in clear).
const sealedHeader = ":idemgen-sealed"

const (
	sealVersion  = 1
	sealNonce    = 12
	sealTag      = 16
	maxKeyIDLen  = 64
	sealAADLabel = "idemgen/sealed-response/v1\x00"
)

// Errors of sealed records. A replay that meets one answers 503
// store-unavailable and never runs the handler.
var (
	// ErrKeyNotInRing: the record was sealed with a key that is not in the
	// key ring (it was removed too early, or the ring is another service's).
	ErrKeyNotInRing = errors.New("idempotency: the record was sealed with a key that is not in the key ring")
	// ErrSealBroken: the envelope does not open with its key: it was
	// altered, or copied from another record.
	ErrSealBroken = errors.New("idempotency: the sealed record does not open: it was altered or moved from another record")
	// ErrSealedWithoutRing: the record is sealed and the middleware has no
	// key ring (Options.Encryption is nil).
	ErrSealedWithoutRing = errors.New("idempotency: the record is sealed and no key ring is configured (Options.Encryption)")
	// ErrNotSealed: encryption is on and the record was saved in clear
	// (see Options.ReplayPlaintext).
	ErrNotSealed = errors.New("idempotency: the record is not sealed and encryption is on")
)

// EncryptionKey is one key of a KeyRing: a 32-byte AES-256 key and its id,
// 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'.
type EncryptionKey struct {
	ID     string
	Secret []byte
}

// KeyRing seals saved responses with its first key and opens them with any
// of its keys. To rotate: put a new key first and keep the old ones until
// every record they sealed has expired (the longest TTL).
type KeyRing struct {
	keys []ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// NewKeyRing returns a key ring of keys, the first of which seals. Every
// key must be 32 bytes and every id valid and distinct.
func NewKeyRing(keys ...EncryptionKey) (*KeyRing, error) {
	if len(keys) == 0 {
		return nil, errors.New("idempotency: a key ring needs at least one key")
	}
	kr := &KeyRing{}
	for i, k := range keys {
		if err := kr.add(k); err != nil {
			return nil, fmt.Errorf("idempotency: key %d: %w", i+1, err)
		}
	}
	return kr, nil
}

func (kr *KeyRing) add(k EncryptionKey) error {
	if err := checkKeyID(k.ID); err != nil {
		return err
	}
	for _, o := range kr.keys {
		if o.id == k.ID {
			return fmt.Errorf("key id %q appears twice", k.ID)
		}
	}
	if len(k.Secret) != 32 {
		return fmt.Errorf("key %q has %d bytes, want 32 (AES-256)", k.ID, len(k.Secret))
	}
	block, err := aes.NewCipher(k.Secret)
	if err != nil {
		return err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return err
	}
	kr.keys = append(kr.keys, ringKey{id: k.ID, aead: aead})
	return nil
}

func checkKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Errorf("key id must be 1 to %d characters, got %d", maxKeyIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("key id %q has a character other than A-Z, a-z, 0-9, '.', '_' and '-'", id)
		}
	}
	return nil
}

// ParseKeyRing reads a keys file: one KEYID:BASE64 line per key (standard
// base64 of 32 bytes, padded or not), the first of which seals; blank
// lines and lines starting with # are skipped. Errors name the line and
// never include key material.
func ParseKeyRing(data []byte) (*KeyRing, error) {
	kr := &KeyRing{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("idempotency: keys file line %d: want KEYID:BASE64", n)
		}
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		enc := base64.StdEncoding
		if !strings.HasSuffix(b64, "=") {
			enc = base64.RawStdEncoding
		}
		secret, err := enc.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("idempotency: keys file line %d: the key is not valid base64", n)
		}
		if err := kr.add(EncryptionKey{ID: id, Secret: secret}); err != nil {
			return nil, fmt.Errorf("idempotency: keys file line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("idempotency: keys file line %d: %w", n+1, err)
	}
	if len(kr.keys) == 0 {
		return nil, errors.New("idempotency: the keys file has no key")
	}
	return kr, nil
}

// LoadKeyRing reads the keys file at path (see ParseKeyRing).
func LoadKeyRing(path string) (*KeyRing, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("idempotency: keys file: %w", err)
	}
	kr, err := ParseKeyRing(data)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return kr, nil
}

// IDs returns the ids of the ring's keys, the sealing key first.
func (kr *KeyRing) IDs() []string {
	ids := make([]string, len(kr.keys))
	for i, k := range kr.keys {
		ids[i] = k.id
	}
	return ids
}

// IsSealed reports whether a saved response is a sealed envelope.
func IsSealed(resp *SavedResponse) bool {
	if resp == nil {
		return false
	}
	_, ok := resp.Header[sealedHeader]
	return ok
}

// SealedKeyID returns the id of the key that sealed resp, without opening
// it; ok is false when resp is not a well-formed envelope.
func SealedKeyID(resp *SavedResponse) (id string, ok bool) {
	if !IsSealed(resp) {
		return "", false
	}
	b := resp.Body
	if len(b) < 2 || b[0] != sealVersion || len(b) < 2+int(b[1])+sealNonce+sealTag {
		return "", false
	}
	return string(b[2 : 2+b[1]]), true
}

// Seal returns resp sealed for the record rk at epoch with the ring's
// first key. A nil resp (a tombstone) stays nil.
func (kr *KeyRing) Seal(rk RecordKey, epoch int64, resp *SavedResponse) (*SavedResponse, error) {
	if resp == nil {
		return nil, nil
	}
	k := kr.keys[0]
	n := 0
	for name, vs := range resp.Header {
		n += binary.MaxVarintLen64 + len(name) + binary.MaxVarintLen64
		for _, v := range vs {
			n += binary.MaxVarintLen64 + len(v)
		}
	}
	prefix := 2 + len(k.id)
	out := make([]byte, prefix+sealNonce, prefix+sealNonce+binary.MaxVarintLen64+n+len(resp.Body)+sealTag)
	out[0] = sealVersion
	out[1] = byte(len(k.id))
	copy(out[2:], k.id)
	nonce := out[prefix : prefix+sealNonce]
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	// The plaintext goes where the ciphertext will be: GCM seals in place.
	pt := binary.AppendUvarint(out[len(out):], uint64(len(resp.Header)))
	for name, vs := range resp.Header {
		pt = appendSealString(pt, name)
		pt = binary.AppendUvarint(pt, uint64(len(vs)))
		for _, v := range vs {
			pt = appendSealString(pt, v)
		}
	}
	pt = append(pt, resp.Body...)
	aad := sealAAD(out[:prefix], rk, epoch, resp.Status)
	ct := k.aead.Seal(pt[:0], nonce, pt, aad)
	return &SavedResponse{
		Status: resp.Status,
		Header: http.Header{sealedHeader: {"1"}},
		Body:   out[:prefix+sealNonce+len(ct)],
	}, nil
}

// Open returns the response that Seal sealed for rk at epoch. It fails
// with ErrKeyNotInRing when the sealing key is not in the ring and with
// ErrSealBroken when the envelope was altered or belongs to another
// record.
func (kr *KeyRing) Open(rk RecordKey, epoch int64, resp *SavedResponse) (*SavedResponse, error) {
	if !IsSealed(resp) {
		return nil, ErrNotSealed
	}
	id, ok := SealedKeyID(resp)
	if !ok {
		return nil, ErrSealBroken
	}
	var k *ringKey
	for i := range kr.keys {
		if kr.keys[i].id == id {
			k = &kr.keys[i]
			break
		}
	}
	if k == nil {
		return nil, fmt.Errorf("%w (key id %q; the ring has %s)", ErrKeyNotInRing, id, strings.Join(kr.IDs(), ", "))
	}
	b := resp.Body
	prefix := 2 + len(id)
	nonce := b[prefix : prefix+sealNonce]
	ct := b[prefix+sealNonce:]
	// Opened into a buffer of its own: the store's bytes may be shared (the
	// MemoryStore hands out the record it keeps).
	pt, err := k.aead.Open(make([]byte, 0, len(ct)-sealTag), nonce, ct, sealAAD(b[:prefix], rk, epoch, resp.Status))
	if err != nil {
		return nil, ErrSealBroken
	}
	d := sealDecoder{b: pt, ok: true}
	names := d.count()
	if names > uint64(len(d.b)) {
		return nil, ErrSealBroken
	}
	h := make(http.Header, names)
	for i := uint64(0); i < names && d.ok; i++ {
		name := d.string()
		m := d.count()
		if m > uint64(len(d.b)) {
			return nil, ErrSealBroken
		}
		vs := make([]string, 0, m)
		for j := uint64(0); j < m && d.ok; j++ {
			vs = append(vs, d.string())
		}
		h[name] = vs
	}
	if !d.ok {
		return nil, ErrSealBroken
	}
	return &SavedResponse{Status: resp.Status, Header: h, Body: d.b}, nil
}

// sealAAD is the additional data of a record's envelope: the envelope's
// prefix (version and key id) and the record it belongs to.
func sealAAD(prefix []byte, rk RecordKey, epoch int64, status int) []byte {
	a := make([]byte, 0, len(sealAADLabel)+len(prefix)+2*binary.MaxVarintLen64+len(rk.Scope)+32+len(rk.Key)+12)
	a = append(a, sealAADLabel...)
	a = append(a, prefix...)
	a = appendSealString(a, rk.Scope)
	a = append(a, rk.PrincipalHash[:]...)
	a = appendSealString(a, rk.Key)
	a = binary.BigEndian.AppendUint64(a, uint64(epoch))
	return binary.BigEndian.AppendUint32(a, uint32(status))
}

func appendSealString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type sealDecoder struct {
	b  []byte
	ok bool
}

func (d *sealDecoder) count() uint64 {
	if !d.ok {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *sealDecoder) string() string {
	l := d.count()
	if l > uint64(len(d.b)) {
		d.ok = false
		return ""
	}
	s := string(d.b[:l])
	d.b = d.b[l:]
	return s
}

// sealed is what the engine saves for resp: sealed when encryption is on.
func (e *engine) sealed(rk RecordKey, epoch int64, resp *SavedResponse) (*SavedResponse, error) {
	if e.ring == nil || resp == nil {
		return resp, nil
	}
	return e.ring.Seal(rk, epoch, resp)
}

// opened is the response a completed record replays: opened when sealed.
// It fails closed: a sealed record without a ring, or a record in clear
// when encryption is on (unless Options.ReplayPlaintext), is an error.
func (e *engine) opened(rk *RecordKey, res *ClaimResult) (*SavedResponse, error) {
	if !IsSealed(res.Response) {
		if e.ring != nil && !e.replayPlaintext {
			return nil, ErrNotSealed
		}
		return res.Response, nil
	}
	if e.ring == nil {
		return nil, ErrSealedWithoutRing
	}
	return e.ring.Open(*rk, res.Epoch, res.Response)
}
