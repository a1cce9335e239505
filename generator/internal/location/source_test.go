package location

import (
	"strings"
	"testing"
)

// walk follows keys from the root of text, as the generator's find does
// within one file, and returns the line:col of the last one, or "" when a
// key is not found.
func walk(text string, keys ...string) string {
	s := NewSource("f", []byte(text))
	off := Root
	for _, k := range keys {
		next, ok := s.Children(off)[k]
		if !ok {
			return ""
		}
		off = next
	}
	p := s.Pos(off)
	return strings.TrimPrefix(p.String(), "f:")
}

// A plain key may start with '-' ("-tenant", a legal component name): it
// is a key, not a block sequence's item, whose '-' is followed by a space.
func TestKeyStartingWithDash(t *testing.T) {
	for _, c := range []struct {
		name, text string
		keys       []string
		want       string
	}{
		{"flow", "components: {parameters: {-tenant: {name: t, x-idempotent: true}}}\n",
			[]string{"components", "parameters", "-tenant", "x-idempotent"}, "1:46"},
		{"block", "components:\n  parameters:\n    -tenant:\n      name: t\n      x-idempotent: true\n",
			[]string{"components", "parameters", "-tenant", "x-idempotent"}, "5:7"},
		{"first key of an item", "parameters:\n- -tenant:\n    x-idempotent: true\n",
			[]string{"parameters", "0", "-tenant", "x-idempotent"}, "3:5"},
	} {
		if got := walk(c.text, c.keys...); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
