// Package location places diagnostics in the text of a spec's files: the
// keys of each YAML or JSON mapping, indexed on first use, so that a
// position can be read for the keys leading to it; a line and a caret to
// show it; and the keys written twice in one mapping, which decoders keep
// the last of without a word. It reads text only: what the files mean, and
// which $refs lead where, is the generator's.
package location

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pos is a place in a spec file. Line and Col are 1-based; zero means
// unknown (a diagnostic then names the file, or the line, alone).
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Positions are read from the spec's text, not from kin-openapi's origins:
// the document is loaded without them (recording them costs the loader
// about half as much time again), and they do not survive every input (a
// JSON document with a surrogate-pair escape loses them all). A position
// is asked for by the keys leading to it from the document's root,
// following $refs into other files; each mapping the search walks through
// is indexed once, on first use, so a run that reports nothing reads no
// text, and one that does reads only the mappings on the way.
//
// The scan understands YAML block mappings and flow mappings (JSON
// objects), which is what OpenAPI documents are written as, and the items
// of block and flow sequences (JSON arrays), asked for by their index
// ("parameters", "0"). Where it cannot follow a key (an alias, a complex
// key) it stops at the last key found.
// It is a scan of the text rather than a parse into go.yaml.in/yaml/v4's
// node tree because the parse costs about a third of kin-openapi's whole
// load (213 ms against 608 ms on Stripe), while indexing only the mappings
// on the way to 252 operations costs about 10 ms.

// Source is one file of the spec: its name in diagnostics, its text, and
// the children of each mapping indexed so far.
type Source struct {
	Name  string
	Text  []byte
	lines []int // byte offset of each line's start; computed on first use
	// kids maps the offset of a key (Root: the document) to the
	// offsets of the keys of the mapping that is its value.
	kids map[int]map[string]int
	// checked is set once the file has been checked for repeated JSON
	// keys (specFiles.give).
	Checked bool
}

// Root stands for the document itself in Source.kids.
const Root = -1

func NewSource(name string, text []byte) *Source {
	return &Source{Name: name, Text: text}
}

func (s *Source) lineStarts() []int {
	if s.lines == nil {
		s.lines = make([]int, 1, bytes.Count(s.Text, []byte{'\n'})+1)
		for i := 0; ; {
			j := bytes.IndexByte(s.Text[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			s.lines = append(s.lines, i)
		}
	}
	return s.lines
}

// Offset converts a 1-based line and rune column to a byte offset, or -1.
func (s *Source) Offset(line, col int) int {
	lines := s.lineStarts()
	if line < 1 || line > len(lines) || col < 1 {
		return -1
	}
	off := lines[line-1]
	for i := 1; i < col && off < len(s.Text); i++ {
		if s.Text[off] == '\n' {
			return -1
		}
		_, n := utf8.DecodeRune(s.Text[off:])
		off += n
	}
	return off
}

// lineOf returns the 0-based line holding byte offset off.
func (s *Source) lineOf(off int) int {
	lines := s.lineStarts()
	line := 0
	lo, hi := 0, len(lines)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if lines[mid] <= off {
			line = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return line
}

// pos converts a byte offset to a position.
func (s *Source) Pos(off int) Pos {
	line := s.lineOf(off)
	col := utf8.RuneCount(s.Text[s.lines[line]:off]) + 1
	return Pos{File: s.Name, Line: line + 1, Col: col}
}

// frame returns the line at p and a caret under p's column, for showing
// where a load error is; "" when p has no line.
func (s *Source) Frame(p Pos) string {
	off := s.Offset(p.Line, max(p.Col, 1))
	if off < 0 {
		return ""
	}
	start := s.lines[p.Line-1]
	end := bytes.IndexByte(s.Text[start:], '\n')
	if end < 0 {
		end = len(s.Text) - start
	}
	line := strings.TrimRight(string(s.Text[start:start+end]), "\r")
	num := fmt.Sprintf("%4d", p.Line)
	var caret strings.Builder
	for _, c := range string(s.Text[start:off]) {
		if c == '\t' {
			caret.WriteByte('\t')
		} else {
			caret.WriteByte(' ')
		}
	}
	return num + " | " + line + "\n" + strings.Repeat(" ", len(num)) + " | " + caret.String() + "^"
}

// Children returns the keys of the mapping that is the value of the key at
// off (Root: the document's top-level mapping), indexed on first use. When
// that value is a sequence (a YAML block sequence or a flow array), the
// keys are the items' indexes ("0", "1"...) and each maps to the item's
// offset (its '-' indicator, or where it starts in a flow array); off may
// be such an item, whose children are the keys of its mapping. An item's offset
// is never a key's: a key starts neither with '{' nor with a '-' followed
// by a space ("-tenant" is a key).
func (s *Source) Children(off int) map[string]int {
	if m, ok := s.kids[off]; ok {
		return m
	}
	if s.kids == nil {
		s.kids = map[int]map[string]int{}
	}
	var m map[string]int
	switch {
	case off == Root:
		m = s.rootChildren()
	case isItem(s.Text, off):
		m = s.blockItemChildren(off)
	case s.Text[off] == '{':
		m = s.flowChildren(off)
	default:
		m = s.valueChildren(off)
	}
	s.kids[off] = m
	return m
}

func (s *Source) rootChildren() map[string]int {
	t := s.Text
	i := 0
	if bytes.HasPrefix(t, utf8BOM) {
		i = len(utf8BOM)
	}
	for {
		i = skipSpace(t, i, true)
		// A directive (%YAML) or the document start marker.
		if bytes.HasPrefix(t[i:], []byte("---")) || (i < len(t) && t[i] == '%') {
			for i < len(t) && t[i] != '\n' {
				i++
			}
			continue
		}
		break
	}
	if i < len(t) && t[i] == '{' {
		return s.flowChildren(i)
	}
	return s.blockChildren(i, -1, -1)
}

func (s *Source) valueChildren(off int) map[string]int {
	t := s.Text
	i := skipKey(t, off)
	i = skipSpace(t, i, false)
	if i >= len(t) || t[i] != ':' {
		return nil
	}
	j := skipSpace(t, i+1, true)
	if j < len(t) && t[j] == '{' {
		return s.flowChildren(j)
	}
	if j < len(t) && t[j] == '[' {
		return s.flowItems(j)
	}
	lines := s.lineStarts()
	line := s.lineOf(off)
	if line+1 >= len(lines) {
		return nil
	}
	keyIndent := off - lines[line]
	if j < len(t) && isItem(t, j) {
		if from := lines[s.lineOf(j)]; j-from >= keyIndent {
			// A block sequence, indented under its key or level with it.
			return s.blockItems(from, j-from)
		}
	}
	return s.blockChildren(lines[line+1], keyIndent, -1)
}

// isItem reports whether t[i] is a block sequence's '-' indicator.
func isItem(t []byte, i int) bool {
	return t[i] == '-' && (i+1 == len(t) || strings.IndexByte(" \t\r\n", t[i+1]) >= 0)
}

// blockItems indexes the YAML block sequence whose items start at column
// indent, from the line starting at from: each item's index maps to the
// offset of its '-'.
func (s *Source) blockItems(from, indent int) map[string]int {
	t := s.Text
	m := map[string]int{}
	for start := from; start < len(t); {
		end, ind, blank := lineAt(t, start)
		switch {
		case blank || ind > indent:
		case ind == indent && isItem(t, start+ind):
			m[strconv.Itoa(len(m))] = start + ind
		default:
			return m
		}
		start = end
	}
	return m
}

// blockItemChildren indexes the mapping of the block sequence item whose
// '-' is at t[dash]: written after the '-' ("- name: x", its further keys
// level with the first) or from the next line.
func (s *Source) blockItemChildren(dash int) map[string]int {
	t := s.Text
	lines := s.lineStarts()
	line := s.lineOf(dash)
	i := skipSpace(t, dash+1, false)
	if i < len(t) && t[i] == '{' {
		return s.flowChildren(i)
	}
	next := len(t)
	if line+1 < len(lines) {
		next = lines[line+1]
	}
	dashIndent := dash - lines[line]
	if i >= len(t) || t[i] == '\n' || t[i] == '#' {
		return s.blockChildren(next, dashIndent, -1)
	}
	m := map[string]int{}
	if k := skipKey(t, i); k > i && k < len(t) && t[k] == ':' && !isItem(t, i) && t[i] != '?' {
		m[keyText(t[i:k])] = i
	}
	maps.Copy(m, s.blockChildren(next, dashIndent, i-lines[line]))
	return m
}

// flowItems indexes the flow sequence (JSON array) opening at t[open]:
// each item's index maps to the offset where it starts.
func (s *Source) flowItems(open int) map[string]int {
	t := s.Text
	m := map[string]int{}
	i := open + 1
	for i < len(t) {
		i = skipSpace(t, i, true)
		if i >= len(t) || t[i] == ']' {
			break
		}
		if t[i] == ',' {
			i++
			continue
		}
		m[strconv.Itoa(len(m))] = i
		end := skipValue(t, i)
		if end <= i {
			break
		}
		i = end
	}
	return m
}

// flowChildren indexes the flow mapping (JSON object) opening at t[open].
func (s *Source) flowChildren(open int) map[string]int {
	t := s.Text
	m := map[string]int{}
	i := open + 1
	for i < len(t) {
		i = skipSpace(t, i, true)
		if i >= len(t) || t[i] == '}' {
			break
		}
		if t[i] == ',' {
			i++
			continue
		}
		keyStart := i
		end := skipScalar(t, i)
		if end <= i {
			break
		}
		m[keyText(t[keyStart:end])] = keyStart
		i = skipSpace(t, end, true)
		if i < len(t) && t[i] == ':' {
			i++
		}
		i = skipSpace(t, i, true)
		i = skipValue(t, i)
	}
	return m
}

// blockChildren indexes the YAML block mapping whose lines start at from,
// indented deeper than keyIndent (-1 for the document's root mapping), its
// keys at column childIndent (-1: that of its first line).
func (s *Source) blockChildren(from, keyIndent, childIndent int) map[string]int {
	t := s.Text
	m := map[string]int{}
	for start := from; start < len(t); {
		end, ind, blank := lineAt(t, start)
		rest := t[start+ind : end]
		if childIndent >= 0 && ind > childIndent {
			start = end // deeper: inside a child's value
			continue
		}
		switch {
		case blank:
		case ind <= keyIndent || (keyIndent < 0 && childIndent >= 0 && ind < childIndent):
			return m
		case childIndent < 0 || ind == childIndent:
			childIndent = ind
			if k := skipKey(rest, 0); k > 0 && k < len(rest) && rest[k] == ':' && !isItem(rest, 0) && rest[0] != '?' {
				m[keyText(rest[:k])] = start + ind
			}
		}
		start = end
	}
	return m
}

// lineAt reads the line of t starting at start: the offset past it (past
// its '\n'), its indentation in spaces, and whether it is blank or holds a
// comment only.
func lineAt(t []byte, start int) (end, ind int, blank bool) {
	end = len(t)
	if n := bytes.IndexByte(t[start:], '\n'); n >= 0 {
		end = start + n + 1
	}
	for start+ind < end && t[start+ind] == ' ' {
		ind++
	}
	rest := t[start+ind : end]
	return end, ind, len(rest) == 0 || rest[0] == '#' || rest[0] == '\n' || rest[0] == '\r'
}

// skipKey skips a mapping key: a quoted string, or a plain scalar up to
// the ':' that ends it (one followed by a space or the end of the line, so
// that /pets/{id} and a:b stay whole).
func skipKey(t []byte, i int) int {
	if i < len(t) && (t[i] == '"' || t[i] == '\'') {
		return skipScalar(t, i)
	}
	for j := i; j < len(t); j++ {
		switch t[j] {
		case ':':
			if j+1 >= len(t) || strings.IndexByte(" \t\r\n,}", t[j+1]) >= 0 {
				return j
			}
		case '\n', '\r':
			return j
		case '#':
			if j > i && (t[j-1] == ' ' || t[j-1] == '\t') {
				return j
			}
		}
	}
	return len(t)
}

// keyText is a key as written, unquoted (JSON escapes decoded).
func keyText(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if bytes.IndexByte(b, '\\') >= 0 {
			var s string
			if json.Unmarshal(b, &s) == nil {
				return s
			}
		}
		return string(b[1 : len(b)-1])
	}
	if len(b) >= 2 && b[0] == '\'' && b[len(b)-1] == '\'' {
		return strings.ReplaceAll(string(b[1:len(b)-1]), "''", "'")
	}
	return string(b)
}

// scalarAt returns the scalar value of the key at off, unquoted.
func (s *Source) ScalarAt(off int) string {
	t := s.Text
	i := skipSpace(t, skipKey(t, off), false)
	if i >= len(t) || t[i] != ':' {
		return ""
	}
	i = skipSpace(t, i+1, false)
	if i < len(t) && (t[i] == '"' || t[i] == '\'') {
		return keyText(t[i:skipScalar(t, i)])
	}
	j := i
	for j < len(t) && strings.IndexByte(",}\r\n", t[j]) < 0 && !(t[j] == '#' && j > i && t[j-1] == ' ') {
		j++
	}
	return strings.TrimSpace(string(t[i:j]))
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

// skipScalar skips a quoted string or a plain flow token.
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
