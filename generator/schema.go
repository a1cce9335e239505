package generator

import (
	"mime"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// jsonBodySchemas returns the schemas of the operation's JSON request
// bodies (application/json and any +json type), in media type order.
func jsonBodySchemas(op *openapi3.Operation) []*openapi3.Schema {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	content := op.RequestBody.Value.Content
	types := make([]string, 0, len(content))
	for mt := range content {
		types = append(types, mt)
	}
	slices.Sort(types)
	var out []*openapi3.Schema
	for _, mt := range types {
		if !isJSONMediaType(mt) {
			continue
		}
		if m := content[mt]; m != nil && m.Schema != nil && m.Schema.Value != nil {
			out = append(out, m.Schema.Value)
		}
	}
	return out
}

func isJSONMediaType(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		t = strings.ToLower(strings.TrimSpace(mt))
	}
	return t == "application/json" || strings.HasSuffix(t, "+json")
}

// hasFieldPath reports whether the dotted path names a property of s,
// looking through properties, allOf, oneOf and anyOf (refs are resolved by
// the loader; cycles are guarded).
func hasFieldPath(s *openapi3.Schema, path string) bool {
	cur := []*openapi3.Schema{s}
	for _, name := range strings.Split(path, ".") {
		var next []*openapi3.Schema
		seen := map[*openapi3.Schema]bool{}
		for _, c := range cur {
			collectProperty(c, name, seen, &next)
		}
		if len(next) == 0 {
			return false
		}
		cur = next
	}
	return true
}

func collectProperty(s *openapi3.Schema, name string, seen map[*openapi3.Schema]bool, out *[]*openapi3.Schema) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if p, ok := s.Properties[name]; ok && p != nil && p.Value != nil {
		*out = append(*out, p.Value)
	}
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range group {
			if r != nil {
				collectProperty(r.Value, name, seen, out)
			}
		}
	}
}
