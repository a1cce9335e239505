package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// CheckJSONNames reports an object of the JSON document body with a member
// name written twice, or two names equal under encoding/json's case
// folding ("id" and "ID"): encoding/json gives a handler the last of them
// (case-insensitively, for a struct field), so a value read from such a
// body by its exact name may not be the one the handler reads. The message
// adapters check a body before they take its id from a field of it.
func CheckJSONNames(body []byte) error {
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
			folded := string(appendFoldedName(nil, []byte(s)))
			if first, dup := names[folded]; dup {
				if first == s {
					return fmt.Errorf("member name %q written twice in one object", s)
				}
				return fmt.Errorf("member names %q and %q: %w", first, s, errFoldedDuplicate)
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
