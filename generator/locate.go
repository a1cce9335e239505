package generator

import (
	"bytes"
	"unicode/utf8"
)

// source is a spec file's text, used to find the position of the keys
// inside an extension's value: kin-openapi records where "x-idempotent"
// itself is, but an extension decodes to a plain map without positions.
// The scan is textual and understands YAML block mappings and flow/JSON
// objects, which is what annotations are written as; when it cannot find a
// key it falls back to the nearest enclosing key's position.
type source struct {
	name  string
	text  []byte
	lines []int // byte offset of each line's start
}

func newSource(name string, text []byte) *source {
	s := &source{name: name, text: text, lines: []int{0}}
	for i, c := range text {
		if c == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	return s
}

// offset converts a 1-based line and rune column to a byte offset, or -1.
func (s *source) offset(line, col int) int {
	if s == nil || line < 1 || line > len(s.lines) || col < 1 {
		return -1
	}
	off := s.lines[line-1]
	for i := 1; i < col && off < len(s.text); i++ {
		_, n := utf8.DecodeRune(s.text[off:])
		if s.text[off] == '\n' {
			return -1
		}
		off += n
	}
	return off
}

// pos converts a byte offset back to a position.
func (s *source) pos(off int) Pos {
	line := 0
	lo, hi := 0, len(s.lines)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if s.lines[mid] <= off {
			line = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	col := utf8.RuneCount(s.text[s.lines[line]:off]) + 1
	return Pos{File: s.name, Line: line + 1, Col: col}
}

// find returns the position of the key reached by following path from the
// key at base (the position of a mapping key such as "x-idempotent").
// Elements it cannot follow leave the last position found.
func (s *source) find(base Pos, path ...string) Pos {
	off := s.offset(base.Line, base.Col)
	if off < 0 {
		return base
	}
	cur := base
	for _, name := range path {
		next := s.child(off, name)
		if next < 0 {
			return cur
		}
		off = next
		cur = s.pos(off)
		cur.File = base.File
	}
	return cur
}

// child finds the key name inside the mapping that is the value of the key
// starting at off, returning the key's offset or -1.
func (s *source) child(off int, name string) int {
	t := s.text
	// Skip the key itself and the colon.
	i := skipScalar(t, off)
	i = skipSpace(t, i, false)
	if i >= len(t) || t[i] != ':' {
		return -1
	}
	i++
	j := skipSpace(t, i, true)
	if j < len(t) && t[j] == '{' {
		return s.flowChild(j, name)
	}
	return s.blockChild(off, name)
}

// flowChild scans the flow mapping (JSON object) opening at t[open].
func (s *source) flowChild(open int, name string) int {
	t := s.text
	i := open + 1
	for i < len(t) {
		i = skipSpace(t, i, true)
		if i >= len(t) || t[i] == '}' {
			return -1
		}
		if t[i] == ',' {
			i++
			continue
		}
		keyStart := i
		end := skipScalar(t, i)
		if end <= i {
			return -1
		}
		if bytes.Equal(unquote(t[keyStart:end]), []byte(name)) {
			return keyStart
		}
		i = skipSpace(t, end, true)
		if i < len(t) && t[i] == ':' {
			i++
		}
		i = skipSpace(t, i, true)
		i = skipValue(t, i)
	}
	return -1
}

// blockChild scans the YAML block mapping under the key at off: the lines
// after it indented deeper than the key.
func (s *source) blockChild(off int, name string) int {
	t := s.text
	p := s.pos(off)
	keyIndent := off - s.lines[p.Line-1]
	childIndent := -1
	for ln := p.Line; ln < len(s.lines); ln++ {
		start := s.lines[ln]
		end := len(t)
		if ln+1 < len(s.lines) {
			end = s.lines[ln+1]
		}
		line := t[start:end]
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		rest := bytes.TrimRight(line[ind:], "\r\n")
		if len(rest) == 0 || rest[0] == '#' {
			continue
		}
		if ind <= keyIndent {
			return -1
		}
		if childIndent < 0 {
			childIndent = ind
		}
		if ind != childIndent {
			continue
		}
		k := skipScalar(rest, 0)
		if k > 0 && k < len(rest) && rest[k] == ':' && bytes.Equal(unquote(rest[:k]), []byte(name)) {
			return start + ind
		}
	}
	return -1
}

func skipSpace(t []byte, i int, newlines bool) int {
	for i < len(t) {
		switch t[i] {
		case ' ', '\t', '\r':
			i++
		case '\n':
			if !newlines {
				return i
			}
			i++
		case '#':
			if !newlines {
				return i
			}
			for i < len(t) && t[i] != '\n' {
				i++
			}
		default:
			return i
		}
	}
	return i
}

// skipScalar skips a quoted string or a plain key token.
func skipScalar(t []byte, i int) int {
	if i >= len(t) {
		return i
	}
	if q := t[i]; q == '"' || q == '\'' {
		i++
		for i < len(t) && t[i] != q && t[i] != '\n' {
			if t[i] == '\\' && q == '"' {
				i++
			}
			i++
		}
		return min(i+1, len(t))
	}
	for i < len(t) {
		switch t[i] {
		case ':', ',', '}', ']', '\n', '\r', '{', '[':
			return i
		}
		i++
	}
	return i
}

// skipValue skips one flow value: a nested object or array, or a scalar.
func skipValue(t []byte, i int) int {
	depth := 0
	for i < len(t) {
		switch c := t[i]; c {
		case '"', '\'':
			i = skipScalar(t, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

func unquote(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && (b[0] == '"' || b[0] == '\'') && b[len(b)-1] == b[0] {
		return b[1 : len(b)-1]
	}
	return b
}
