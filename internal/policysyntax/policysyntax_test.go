package policysyntax_test

import (
	"slices"
	"testing"

	"github.com/idemgen/idemgen/internal/policysyntax"
	_ "github.com/idemgen/idemgen/internal/testutil"
)

func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		route, shape string
		params       []string
	}{
		{"/", "/", nil},
		{"/orders/{id}", "/orders/{}", []string{"id"}},
		{"/files/{name}.{ext}/", "/files/{}.{}/", []string{"name", "ext"}},
	} {
		pt, err := policysyntax.ParseRoute(tc.route)
		if err != nil {
			t.Errorf("ParseRoute(%q): %v", tc.route, err)
			continue
		}
		if pt.Shape != tc.shape || !slices.Equal(pt.Params, tc.params) {
			t.Errorf("ParseRoute(%q) = shape %q params %q, want %q %q", tc.route, pt.Shape, pt.Params, tc.shape, tc.params)
		}
	}
	for _, bad := range []string{"", "orders", "/a/{", "/a/}", "/a/{}", "/{a}/{a}", "/{a}{b}", "/a?b=1", "/a#f"} {
		if _, err := policysyntax.ParseRoute(bad); err == nil {
			t.Errorf("ParseRoute(%q) accepted", bad)
		}
	}
	// A base path is a template: the query check is the route's alone.
	if _, err := policysyntax.ParseTemplate("/a?b"); err != nil {
		t.Errorf("ParseTemplate(/a?b): %v", err)
	}
}

func TestSplitPointer(t *testing.T) {
	for p, want := range map[string][]string{"": {}, "/a/b": {"a", "b"}, "/a~1b/~0c": {"a/b", "~c"}, "/": {""}} {
		got, err := policysyntax.SplitPointer(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitPointer(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, bad := range []string{"a", "/a~", "/a~2"} {
		if _, err := policysyntax.SplitPointer(bad); err == nil {
			t.Errorf("SplitPointer(%q) accepted", bad)
		}
	}
}

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{"Idempotency-Key": true, "POST": true, "": false, "a b": false, "a:b": false, "é": false} {
		if got := policysyntax.IsToken(s); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", s, got, want)
		}
	}
}
