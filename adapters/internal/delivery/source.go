// Package delivery holds what the broker adapters (natsidem, amqpidem,
// watermillidem) share: where a message's id comes from (Source), and how
// one delivery runs through idemrt.ProcessOnce and what the adapter must
// then tell its broker (Run, Result).
package delivery

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/idemgen/idemgen/internal/jsonnames"
	"github.com/idemgen/idemgen/internal/policysyntax"
)

// MaxID is the longest message id and consumer name the SQL stores keep
// (their processed-id columns hold 255 bytes).
const MaxID = 255

// ErrNoID is wrapped by Source.ID when the message carries no id where the
// source looks: such a message is refused, never processed without
// deduplication.
var ErrNoID = errors.New("message has no id")

type kind uint8

const (
	kindBroker kind = iota
	kindHeader
	kindBody
	kindHash
)

// Source says where a message's id comes from. The zero Source is Broker.
type Source struct {
	kind   kind
	name   string   // the header name, or the JSON Pointer's text
	tokens []string // the JSON Pointer's tokens
	err    error    // a bad pointer, reported by Validate
}

// Broker reads the broker's own message id: Nats-Msg-Id on JetStream, the
// message-id property on AMQP, the message's UUID on Watermill.
func Broker() Source { return Source{} }

// Header reads the id from the named header (AMQP header table entry,
// Watermill metadata key).
func Header(name string) Source {
	s := Source{kind: kindHeader, name: name}
	if name == "" {
		s.err = errors.New("message id source: empty header name")
	}
	return s
}

// BodyField reads the id from the JSON body at pointer (RFC 6901, e.g.
// "/event/id"). The value must be a string or a number; a number is used as
// written in the body.
func BodyField(pointer string) Source {
	s := Source{kind: kindBody, name: pointer}
	toks, err := policysyntax.SplitPointer(pointer)
	switch {
	case err != nil:
		s.err = fmt.Errorf("message id source: %w", err)
	case len(toks) == 0:
		s.err = errors.New(`message id source: the body pointer "" names the whole body, not a field`)
	}
	s.tokens = toks
	return s
}

// ContentHash uses the SHA-256 of the body as the id: two messages with
// the same body are then the same message for deduplication. Use it only
// when that is what the messages mean; it is never a default.
func ContentHash() Source { return Source{kind: kindHash} }

// Validate reports a source that cannot be used (an empty header name, a
// malformed pointer).
func (s Source) Validate() error { return s.err }

// String describes the source for logs and errors.
func (s Source) String() string {
	switch s.kind {
	case kindHeader:
		return "header " + strconv.Quote(s.name)
	case kindBody:
		return "body field " + strconv.Quote(s.name)
	case kindHash:
		return "content hash"
	}
	return "broker message id"
}

// Message is what a source reads from one delivery.
type Message struct {
	// BrokerID is the broker's own message id ("" when the message has none).
	BrokerID string
	// Header returns the value of a header ("" when absent); nil for none.
	Header func(name string) string
	Body   []byte
}

// ID returns the message's id. It wraps ErrNoID when the source finds none
// (an absent or empty id, a body that is not JSON or lacks the field), and
// refuses ids longer than MaxID bytes.
func (s Source) ID(m Message) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	var id string
	switch s.kind {
	case kindBroker:
		id = m.BrokerID
	case kindHeader:
		if m.Header != nil {
			id = m.Header(s.name)
		}
	case kindBody:
		v, err := bodyField(m.Body, s.tokens)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNoID, s, err)
		}
		id = v
	case kindHash:
		sum := sha256.Sum256(m.Body)
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	if id == "" {
		return "", fmt.Errorf("%w: %s is absent or empty", ErrNoID, s)
	}
	if len(id) > MaxID {
		return "", fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrNoID, s, len(id), MaxID)
	}
	return id, nil
}

// bodyField returns the string or number at toks in the JSON body.
func bodyField(body []byte, toks []string) (string, error) {
	// A name written twice, or in two letter cases, leaves the id to the
	// order of the members: the handler, decoding with encoding/json, may
	// read another value than the one taken here, and two different
	// messages would then share an id.
	if err := jsonnames.Check(body); err != nil {
		return "", fmt.Errorf("body is not plain JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("body is not JSON: %v", err)
	}
	if dec.More() {
		return "", errors.New("body is not one JSON value")
	}
	for _, tok := range toks {
		next, ok := member(v, tok)
		if !ok {
			return "", errors.New("field is absent")
		}
		v = next
	}
	switch c := v[0]; {
	case c == '"':
		// encoding/json decodes each invalid UTF-8 byte and each lone
		// surrogate escape to U+FFFD: ids that differ only there would
		// decode alike, and two different messages would share an id.
		if err := plainString(v); err != nil {
			return "", fmt.Errorf("field is not a plain string: %v", err)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("field is not a string: %v", err)
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return string(v), nil // a number, as written
	case c == 'n':
		return "", errors.New("field is null")
	}
	return "", fmt.Errorf("field is %s, not a string or number", kindOf(v[0]))
}

// member returns the value of the object member name, or of the array
// element at index name, in the JSON value v.
func member(v json.RawMessage, name string) (json.RawMessage, bool) {
	switch v[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return nil, false
		}
		next, ok := m[name]
		return next, ok
	case '[':
		var a []json.RawMessage
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || (len(name) > 1 && name[0] == '0') || json.Unmarshal(v, &a) != nil || i >= len(a) {
			return nil, false
		}
		return a[i], true
	}
	return nil, false
}

func kindOf(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "a boolean"
}

// plainString reports a JSON string token (quotes included) that holds
// invalid UTF-8 or a \u escape of a lone surrogate: text that
// encoding/json replaces with U+FFFD.
func plainString(tok []byte) error {
	if !utf8.Valid(tok) {
		return errors.New("invalid UTF-8")
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] != '\\' {
			continue
		}
		if i+1 < len(tok) && tok[i+1] != 'u' {
			i++ // a one-letter escape: skip its letter
			continue
		}
		r := hex4(tok, i+2)
		switch {
		case r >= 0xD800 && r < 0xDC00: // a high surrogate: a low one must follow
			if i+7 < len(tok) && tok[i+6] == '\\' && tok[i+7] == 'u' {
				if lo := hex4(tok, i+8); lo >= 0xDC00 && lo < 0xE000 {
					i += 11
					continue
				}
			}
			return errors.New("a lone surrogate escape")
		case r >= 0xDC00 && r < 0xE000:
			return errors.New("a lone surrogate escape")
		}
		i += 5
	}
	return nil
}

// hex4 is the value of the four hexadecimal digits at tok[i:], or -1.
func hex4(tok []byte, i int) rune {
	if i+4 > len(tok) {
		return -1
	}
	n, err := strconv.ParseUint(string(tok[i:i+4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}
