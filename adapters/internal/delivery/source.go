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
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("body is not JSON: %v", err)
	}
	if dec.More() {
		return "", errors.New("body is not one JSON value")
	}
	for _, tok := range toks {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return "", errors.New("field is absent")
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
				return "", errors.New("field is absent")
			}
			v = c[i]
		default:
			return "", errors.New("field is absent")
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case nil:
		return "", errors.New("field is null")
	}
	return "", fmt.Errorf("field is a %T, not a string or number", v)
}
