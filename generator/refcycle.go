package generator

import (
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/generator/internal/location"
)

// The loader leaves a $ref that leads back to itself, through any number
// of files, unresolved and says nothing: a path item whose $refs form a
// cycle has no operations, and a request body schema none. These checks
// name the cycle where it is written.

// node returns the file and key offset reached by following keys from
// the main document's root, through $refs, as find does; false when a
// key is not found.
func (fs *specFiles) node(keys ...string) (*location.Source, int, bool) {
	s, off := fs.main, location.Root
	keys = slices.Clone(keys)
	for hops := 0; len(keys) > 0; {
		kids := s.Children(off)
		if next, ok := kids[keys[0]]; ok {
			off, keys = next, keys[1:]
			continue
		}
		ref, ok := kids["$ref"]
		if !ok || hops == maxRefHops {
			return nil, 0, false
		}
		hops++
		target, frag, ok := fs.follow(s, s.ScalarAt(ref))
		if !ok {
			return nil, 0, false
		}
		s, off = target, location.Root
		keys = append(frag, keys...)
	}
	return s, off, true
}

// refCycle follows the $refs from the value reached by keys while each
// leads to another $ref. When they come back to one already followed, it
// returns the $refs of the cycle (each as file#fragment, in order) and
// the position of the first; else ok is false.
func (fs *specFiles) refCycle(keys ...string) (cycle []string, at Pos, ok bool) {
	s, off, found := fs.node(keys...)
	if !found {
		return nil, Pos{}, false
	}
	type hop struct {
		id  string
		pos Pos
	}
	var hops []hop
	for range maxRefHops {
		ref, has := s.Children(off)["$ref"]
		if !has {
			return nil, Pos{}, false
		}
		target, frag, followed := fs.follow(s, s.ScalarAt(ref))
		if !followed {
			return nil, Pos{}, false
		}
		id := target.Name + "#/" + strings.Join(frag, "/")
		for i, h := range hops {
			if h.id == id {
				// The cycle starts at the $ref written at the place
				// the repeated one names.
				for _, x := range hops[i:] {
					cycle = append(cycle, x.id)
				}
				cycle = append(cycle, id)
				return cycle, hops[i+1].pos, true
			}
		}
		hops = append(hops, hop{id, s.Pos(ref)})
		ns, noff := target, location.Root
		for _, k := range frag {
			next, ok := ns.Children(noff)[k]
			if !ok {
				return nil, Pos{}, false
			}
			noff = next
		}
		s, off = ns, noff
	}
	return nil, Pos{}, false
}

// checkPathItemCycles reports the path items whose $refs form a cycle:
// the loader leaves them without operations.
func (b *builder) checkPathItemCycles(items map[string]*openapi3.PathItem, top string) {
	for _, name := range slices.Sorted(maps.Keys(items)) {
		item := items[name]
		if item == nil || item.Ref == "" || len(item.Operations()) > 0 {
			continue
		}
		if cycle, at, ok := b.files.refCycle(top, name); ok {
			b.d.add(at, "%s %s: its $ref never reaches a path item, it is a cycle (%s): the path has no operations; make one of them the path item itself",
				strings.TrimSuffix(top, "s"), name, strings.Join(cycle, " -> "))
		}
	}
}

// bodyRefCycle reports, for an operation whose request body has no JSON
// schema the loader resolved, a cycle of $refs in the body or its JSON
// schemas; true when it found one.
func (b *builder) bodyRefCycle(r *opRef) bool {
	keys := r.field("requestBody")
	rb := r.op.RequestBody
	if rb == nil {
		return false
	}
	if rb.Value == nil {
		return b.reportRefCycle(r, keys, "request body")
	}
	found := false
	for _, mt := range slices.Sorted(maps.Keys(rb.Value.Content)) {
		m := rb.Value.Content[mt]
		if isJSONMediaType(mt) && m != nil && m.Schema != nil && m.Schema.Value == nil {
			if b.reportRefCycle(r, append(slices.Clip(keys), "content", mt, "schema"), mt+" request body schema") {
				found = true
			}
		}
	}
	return found
}

func (b *builder) reportRefCycle(r *opRef, keys []string, what string) bool {
	cycle, at, ok := b.files.refCycle(keys...)
	if !ok {
		return false
	}
	b.d.add(at, "operation %s: the $ref of its %s never reaches a value, it is a cycle (%s); make one of them the value itself", describeRef(r), what, strings.Join(cycle, " -> "))
	return true
}
