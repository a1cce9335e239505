// Package jsonnames compares JSON member names as encoding/json matches
// them to struct fields: by their exact name, else by their name folded
// (ASCII letters upper-cased, every other rune replaced by the smallest rune
// of its unicode.SimpleFold orbit), the last one in the document winning.
// Two such names in one object make what a handler reads depend on their
// order. The runtime's fingerprint refuses them, and the message adapters
// refuse a body that holds them before they take its id from a field of it.
// It imports only the standard library, as the runtime does.
package jsonnames

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// ErrFoldedDuplicate is returned for an object with two member names that
// are not equal but that encoding/json matches to the same struct field
// ("amount" and "Amount"): which value a handler gets depends on their
// order.
var ErrFoldedDuplicate = errors.New("member names equal under encoding/json's case folding")

// Check reports an object of the JSON document body with a member name
// written twice, or two names equal once folded ("id" and "ID", wrapping
// ErrFoldedDuplicate): encoding/json gives a handler the last of them
// (case-insensitively, for a struct field), so a value read from such a
// body by its exact name may not be the one the handler reads.
func Check(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// open holds, per open container, the folded member names of an object
	// (nil for an array). name is true when the next token is a name.
	var open []map[string]string
	name := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(open) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		if s, ok := tok.(string); ok && name {
			names := open[len(open)-1]
			folded := string(AppendFolded(nil, []byte(s)))
			if first, dup := names[folded]; dup {
				if first == s {
					return fmt.Errorf("member name %q written twice in one object", s)
				}
				return fmt.Errorf("member names %q and %q: %w", first, s, ErrFoldedDuplicate)
			}
			names[folded] = s
			name = false // its value comes next
			continue
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, map[string]string{})
		case json.Delim('['):
			open = append(open, nil)
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
		}
		// After '{' or a complete value, an object's next token is a name.
		name = len(open) > 0 && open[len(open)-1] != nil && dec.More()
	}
}

// AppendFolded appends the name in, folded, to out: encoding/json's
// appendFoldedName (encoding/json/fold.go).
func AppendFolded(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune returns the smallest rune of r's unicode.SimpleFold orbit
// (encoding/json's foldRune).
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
