package generator

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/internal/location"
)

// Positions are read from the spec's text (package location), not from
// kin-openapi's origins: see location's doc. A position is asked for by
// the keys leading to it from the document's root, following $refs into
// other files.

// maxRefHops bounds the $refs one search follows (a $ref cycle ends it).
const maxRefHops = 32

// find returns the position of the key reached by following keys from the
// root of the spec's main document, stepping through a $ref wherever a
// key is not found next to it. Keys it cannot follow leave the position
// of the last key found (the file alone when none was).
func (fs *specFiles) find(keys ...string) Pos {
	p, _ := fs.findRest(keys...)
	return p
}

// findRest is find, which also returns the keys it could not follow (none
// when the position is the last key's).
func (fs *specFiles) findRest(keys ...string) (Pos, []string) {
	s, off := fs.main, location.Root
	cur := Pos{File: s.Name}
	if fs.noPos {
		return cur, keys
	}
	keys = slices.Clone(keys)
	for hops := 0; len(keys) > 0; {
		kids := s.Children(off)
		if next, ok := kids[keys[0]]; ok {
			off, keys = next, keys[1:]
			cur = s.Pos(off)
			continue
		}
		ref, ok := kids["$ref"]
		if !ok || hops == maxRefHops {
			return cur, keys
		}
		hops++
		target, frag, ok := fs.follow(s, s.ScalarAt(ref))
		if !ok {
			return cur, keys
		}
		s, off = target, location.Root
		keys = append(frag, keys...)
	}
	return cur, nil
}

// follow resolves a $ref written in file from: the file it names (among
// those loaded) and the keys of its fragment.
func (fs *specFiles) follow(from *location.Source, ref string) (*location.Source, []string, bool) {
	file, frag, _ := strings.Cut(ref, "#")
	target := from
	if file != "" {
		target = fs.byName[fs.resolve(from.Name, file)]
		if target == nil {
			return nil, nil, false
		}
	}
	return target, pointerKeys(frag), true
}

// pointerKeys decodes the JSON Pointer of a $ref's fragment ("/paths/~1orders",
// percent-encoded or not) into its keys; nil for the whole document.
func pointerKeys(frag string) []string {
	frag = strings.TrimPrefix(frag, "/")
	if frag == "" {
		return nil
	}
	var keys []string
	for _, k := range strings.Split(frag, "/") {
		if u, err := url.PathUnescape(k); err == nil {
			k = u
		}
		keys = append(keys, strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~"))
	}
	return keys
}

// resolve names the file that ref, written in the file named from, points
// to, as the spec's files are named: a URL for a remote one, else a
// cleaned OS path.
func (fs *specFiles) resolve(from, ref string) string {
	if isRemote(from) || isRemote(ref) {
		base, err1 := url.Parse(from)
		r, err2 := url.Parse(ref)
		if err1 != nil || err2 != nil {
			return ref
		}
		return base.ResolveReference(r).String()
	}
	return filepath.Clean(filepath.Join(filepath.Dir(from), filepath.FromSlash(ref)))
}

func isRemote(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}
