package location

import (
	"bytes"
	"slices"
	"strings"
)

// FindRef finds a $ref value starting with ref (quoted or not; a fragment
// may follow it) in s's text: the position of its opening quote, if any.
func (s *Source) FindRef(ref string) (Pos, bool) {
	for _, q := range []string{`"`, `'`, ` `, `./`} {
		needle := []byte(q + ref)
		for from := 0; ; {
			i := bytes.Index(s.Text[from:], needle)
			if i < 0 {
				break
			}
			i += from
			from = i + 1
			end := i + len(needle)
			if end < len(s.Text) && strings.IndexByte("\"'#\r\n ,}", s.Text[end]) < 0 {
				continue // a longer name
			}
			if q == ` ` {
				i++
			}
			return s.Pos(i), true
		}
	}
	return Pos{}, false
}

// FindRefs returns the offsets of every $ref value in s that is ref, or
// ref followed by a fragment (quoted or not, with ./ before a relative
// path or not): where the value (its opening quote) starts.
func (s *Source) FindRefs(ref string) []int {
	var out []int
	seen := map[int]bool{}
	for _, q := range []string{`"`, `'`, ` `, `"./`, `'./`, ` ./`} {
		needle := []byte(q + ref)
		for from := 0; ; {
			i := bytes.Index(s.Text[from:], needle)
			if i < 0 {
				break
			}
			i += from
			from = i + 1
			end := i + len(needle)
			if end < len(s.Text) && strings.IndexByte("\"'#\r\n ,}", s.Text[end]) < 0 {
				continue // a longer name
			}
			if q[0] == ' ' {
				i++
			}
			if !seen[i] && RefKeyBefore(s.Text, i) >= 0 {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out
}

// RefKeyBefore returns the offset of the $ref key whose value starts at
// off ($ref: x, "$ref": "x", {$ref: 'x'}), or -1.
func RefKeyBefore(t []byte, off int) int {
	i := off - 1
	for i >= 0 && (t[i] == ' ' || t[i] == '\t') {
		i--
	}
	if i < 0 || t[i] != ':' {
		return -1
	}
	i--
	for i >= 0 && (t[i] == ' ' || t[i] == '\t') {
		i--
	}
	if i >= 0 && (t[i] == '"' || t[i] == '\'') {
		i--
	}
	if i >= 3 && string(t[i-3:i+1]) == "$ref" {
		return i - 3
	}
	return -1
}
