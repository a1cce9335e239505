package location

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"
)

// Repeated keys. A key written twice in one mapping (JSON object) is a
// mistake the user must hear about: JSON decoders keep the last one
// silently, so an annotation written first would vanish. YAML's loader
// refuses such a document, and kin-openapi then reads a JSON one with
// encoding/json, which keeps the last; neither says where every Repeat is.
// So each file's repeats are found here (JSON files by JSONRepeats before
// the loader sees them, YAML ones by YAMLRepeats when the loader refuses
// them), each is reported at the repeated key, and the loader is given the
// text with the earlier occurrences blanked out (DropRepeats), which it
// reads as the last one written: the rest of the document is checked in
// the same run.

// Repeat is a key written again in the same mapping: at is the byte offset
// of the repeated key, prev that of the occurrence before it, and
// [prev, prevEnd) the bytes of that earlier entry (its key, its value and
// the separator after it) that DropRepeats blanks.
type Repeat struct {
	Key           string
	At            int
	Prev, PrevEnd int
}

// DropRepeats returns a copy of text with the earlier entry of each Repeat
// replaced by spaces, one per character, line breaks kept: every line and
// column of the rest of the text (what loader errors are placed by) stays
// where it was, as do its byte offsets unless a blanked entry holds a
// multi-byte character.
func DropRepeats(text []byte, reps []Repeat) []byte {
	out := make([]byte, 0, len(text))
	at := 0
	for _, r := range sortedRepeats(reps) {
		if r.Prev < at {
			continue // inside an entry blanked already (cannot happen: entries of one mapping do not overlap)
		}
		out = append(out, text[at:r.Prev]...)
		for _, c := range string(text[r.Prev:r.PrevEnd]) {
			if c == '\n' || c == '\r' {
				out = append(out, byte(c))
			} else {
				out = append(out, ' ')
			}
		}
		at = r.PrevEnd
	}
	return append(out, text[at:]...)
}

// sortedRepeats orders repeats by the entry they blank.
func sortedRepeats(reps []Repeat) []Repeat {
	out := slices.Clone(reps)
	slices.SortFunc(out, func(a, b Repeat) int { return cmp.Compare(a.Prev, b.Prev) })
	return out
}

// JSONRepeats finds the repeated keys of every object of a JSON text, each
// against the occurrence before it; keys are compared as encoding/json
// decodes them ("a" and "\u0061" are one key). ok is false, and nothing is
// returned, when data is not one valid JSON value (exactly when
// json.Valid(data) is false): a YAML file is left to the YAML loader.
func JSONRepeats(data []byte) (reps []Repeat, ok bool) {
	sc := jsonScanner{data: data}
	if bytes.HasPrefix(data, utf8BOM) {
		sc.i = len(utf8BOM) // offsets stay those of data
	}
	if !sc.scan() {
		return nil, false
	}
	return sc.reps, true
}

// utf8BOM is a UTF-8 byte-order mark, which a JSON file may begin with
// (the YAML loader reading it skips one).
var utf8BOM = []byte("\xEF\xBB\xBF")

// maxJSONDepth is encoding/json's nesting limit; deeper is invalid.
const maxJSONDepth = 10000

// smallObject is the number of keys an object is searched by a linear
// scan for a Repeat; a larger one gets a map.
const smallObject = 16

type jsonScanner struct {
	data []byte
	i    int
	// keys are the keys of the open objects, innermost last; frames the
	// open objects and arrays.
	keys   []jsonKey
	frames []jsonFrame
	reps   []Repeat
}

type jsonKey struct {
	start, end int    // the key's bytes, quotes included
	name       string // the decoded key, for one with escapes or invalid UTF-8
	decoded    bool
	entryEnd   int // past the comma after its value
}

type jsonFrame struct {
	object bool
	base   int            // the object's first key in keys
	cur    int            // the key whose value is being read
	index  map[string]int // the object's keys, once it has more than smallObject
}

func (sc *jsonScanner) ws() {
	for sc.i < len(sc.data) {
		switch sc.data[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// scan reads one value and the whitespace around it, iteratively (a
// deeply nested document must not grow the stack).
func (sc *jsonScanner) scan() bool {
	d := sc.data
	for {
		// A value.
		sc.ws()
		if sc.i >= len(d) {
			return false
		}
		switch c := d[sc.i]; {
		case c == '{' || c == '[':
			sc.i++
			if len(sc.frames) >= maxJSONDepth {
				return false
			}
			sc.frames = append(sc.frames, jsonFrame{object: c == '{', base: len(sc.keys)})
			sc.ws()
			if sc.i < len(d) && (c == '{' && d[sc.i] == '}' || c == '[' && d[sc.i] == ']') {
				sc.i++
				sc.frames = sc.frames[:len(sc.frames)-1]
				break // an empty one: the value is read
			}
			if c == '{' && !sc.key() {
				return false
			}
			continue // its first value
		case c == '"':
			if _, ok := sc.str(); !ok {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if !sc.number() {
				return false
			}
		case c == 't':
			if !sc.literal("true") {
				return false
			}
		case c == 'f':
			if !sc.literal("false") {
				return false
			}
		case c == 'n':
			if !sc.literal("null") {
				return false
			}
		default:
			return false
		}
		// After a value: close what ends, until a comma asks for another.
		for {
			sc.ws()
			if len(sc.frames) == 0 {
				return sc.i == len(d)
			}
			if sc.i >= len(d) {
				return false
			}
			f := &sc.frames[len(sc.frames)-1]
			c := d[sc.i]
			if c == ',' {
				sc.i++
				if f.object {
					sc.keys[f.cur].entryEnd = sc.i
					sc.ws()
					if !sc.key() {
						return false
					}
				}
				break
			}
			if f.object && c == '}' || !f.object && c == ']' {
				sc.i++
				if f.object {
					sc.keys = sc.keys[:f.base]
				}
				sc.frames = sc.frames[:len(sc.frames)-1]
				continue
			}
			return false
		}
	}
}

// key reads an object's key and its colon, and records it in the
// innermost object, noting a Repeat.
func (sc *jsonScanner) key() bool {
	if sc.i >= len(sc.data) || sc.data[sc.i] != '"' {
		return false
	}
	start := sc.i
	plain, ok := sc.str()
	if !ok {
		return false
	}
	k := jsonKey{start: start, end: sc.i}
	if !plain {
		// As encoding/json decodes it (invalid UTF-8 and lone surrogates
		// become U+FFFD); the key is valid, so this cannot fail.
		var name string
		if json.Unmarshal(sc.data[start:sc.i], &name) != nil {
			return false
		}
		k.name, k.decoded = name, true
	}
	sc.ws()
	if sc.i >= len(sc.data) || sc.data[sc.i] != ':' {
		return false
	}
	sc.i++
	f := &sc.frames[len(sc.frames)-1]
	if j := sc.find(f, k); j >= 0 {
		prev := sc.keys[j]
		sc.reps = append(sc.reps, Repeat{Key: sc.name(k), At: k.start, Prev: prev.start, PrevEnd: prev.entryEnd})
		sc.keys[j] = k // the next Repeat is against this one
		f.cur = j
		return true
	}
	sc.keys = append(sc.keys, k)
	f.cur = len(sc.keys) - 1
	if f.index != nil {
		f.index[sc.name(k)] = f.cur
	} else if n := len(sc.keys) - f.base; n > smallObject {
		f.index = make(map[string]int, 2*n)
		for j := f.base; j < len(sc.keys); j++ {
			f.index[sc.name(sc.keys[j])] = j
		}
	}
	return true
}

// raw is a key's text between its quotes; its name when it has no escape.
func (sc *jsonScanner) raw(k jsonKey) []byte { return sc.data[k.start+1 : k.end-1] }

func (sc *jsonScanner) name(k jsonKey) string {
	if k.decoded {
		return k.name
	}
	return string(sc.raw(k))
}

// find returns the index in keys of the key of object f equal to k, or -1.
func (sc *jsonScanner) find(f *jsonFrame, k jsonKey) int {
	if f.index != nil {
		var j int
		var ok bool
		if k.decoded {
			j, ok = f.index[k.name]
		} else {
			j, ok = f.index[string(sc.raw(k))] // no allocation
		}
		if ok {
			return j
		}
		return -1
	}
	for j := f.base; j < len(sc.keys); j++ {
		o := sc.keys[j]
		switch {
		case !k.decoded && !o.decoded:
			if bytes.Equal(sc.raw(k), sc.raw(o)) {
				return j
			}
		case k.decoded && o.decoded:
			if k.name == o.name {
				return j
			}
		case k.decoded:
			if k.name == string(sc.raw(o)) {
				return j
			}
		default:
			if o.name == string(sc.raw(k)) {
				return j
			}
		}
	}
	return -1
}

// str reads a string; plain is whether its text is its value (no escape,
// valid UTF-8).
func (sc *jsonScanner) str() (plain, ok bool) {
	d := sc.data
	sc.i++ // the opening quote
	plain = true
	ascii := true
	start := sc.i
	for sc.i < len(d) {
		c := d[sc.i]
		if !strSpecial[c] {
			sc.i++
			continue
		}
		switch {
		case c == '"':
			if !ascii && plain && !utf8.Valid(d[start:sc.i]) {
				plain = false
			}
			sc.i++
			return plain, true
		case c < 0x20:
			return false, false
		case c == '\\':
			plain = false
			sc.i++
			if sc.i >= len(d) {
				return false, false
			}
			switch d[sc.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.i++
			case 'u':
				sc.i++
				if sc.i+4 > len(d) {
					return false, false
				}
				for _, h := range d[sc.i : sc.i+4] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false, false
					}
				}
				sc.i += 4
			default:
				return false, false
			}
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			sc.i++
		}
	}
	return false, false
}

// strSpecial marks the bytes str must look at: the quote, the backslash,
// control characters (invalid in a string) and non-ASCII ones.
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

func (sc *jsonScanner) digits() int {
	n := 0
	for sc.i < len(sc.data) && sc.data[sc.i] >= '0' && sc.data[sc.i] <= '9' {
		sc.i++
		n++
	}
	return n
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *jsonScanner) number() bool {
	d := sc.data
	if d[sc.i] == '-' {
		sc.i++
	}
	switch {
	case sc.i < len(d) && d[sc.i] == '0':
		sc.i++
	case sc.digits() == 0:
		return false
	}
	if sc.i < len(d) && d[sc.i] == '.' {
		sc.i++
		if sc.digits() == 0 {
			return false
		}
	}
	if sc.i < len(d) && (d[sc.i] == 'e' || d[sc.i] == 'E') {
		sc.i++
		if sc.i < len(d) && (d[sc.i] == '+' || d[sc.i] == '-') {
			sc.i++
		}
		if sc.digits() == 0 {
			return false
		}
	}
	return true
}

func (sc *jsonScanner) literal(word string) bool {
	if !bytes.HasPrefix(sc.data[sc.i:], []byte(word)) {
		return false
	}
	sc.i += len(word)
	return true
}

// YAMLRepeats finds the repeated keys of every mapping of a YAML
// document's node tree, as the YAML loader compares them (same kind, same
// value), each against the occurrence before it; offsets are in s's text.
// ok is false when a key's position cannot be found in the text.
func YAMLRepeats(s *Source, root *yaml.Node) (reps []Repeat, ok bool) {
	type id struct {
		kind  yaml.Kind
		value string
	}
	ok = true
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			last := map[id]int{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				key := id{k.Kind, k.Value}
				j, seen := last[key]
				last[key] = i
				if !seen {
					continue
				}
				if k.Anchor != "" || k.Tag != "" && k.Style&yaml.TaggedStyle != 0 {
					// The text's key locator (locate.go) reads a key
					// written "&a key" or "!!str key" as that whole
					// text, so positions found after the earlier entry
					// is blanked would be wrong: report the Repeat as
					// the load error it is.
					ok = false
					continue
				}
				// The entry after the earlier one exists: this one at least.
				next := n.Content[j+2]
				r := Repeat{Key: k.Value, At: s.Offset(k.Line, k.Column), Prev: s.Offset(n.Content[j].Line, n.Content[j].Column),
					PrevEnd: s.Offset(next.Line, next.Column)}
				if r.At < 0 || r.Prev < 0 || r.PrevEnd <= r.Prev {
					ok = false
					continue
				}
				reps = append(reps, r)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	return reps, ok
}
