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

// nonJSONBodyTypes returns the operation's request media types that are
// not JSON, sorted.
func nonJSONBodyTypes(op *openapi3.Operation) []string {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	var out []string
	for mt := range op.RequestBody.Value.Content {
		if !isJSONMediaType(mt) {
			out = append(out, mt)
		}
	}
	slices.Sort(out)
	return out
}

func isJSONMediaType(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		t = strings.ToLower(strings.TrimSpace(mt))
	}
	return t == "application/json" || strings.HasSuffix(t, "+json")
}

// anyHasPath reports whether one of the schemas has the property path
// names (a key.fields path split at its dots, or a fingerprint pointer's
// tokens), looking through properties, allOf, oneOf and anyOf (refs are
// resolved by the loader; cycles are guarded). A map (an object with an
// explicit additionalProperties) takes any name: into the schema of its
// values, or anything below when that is `true`. With indexes, a token
// that is an array index (0, 12) steps into an array schema's items, as
// JSON pointers do.
func anyHasPath(schemas []*openapi3.Schema, names []string, indexes bool) bool {
	for _, s := range schemas {
		if hasPath(s, names, indexes) {
			return true
		}
	}
	return false
}

func hasPath(s *openapi3.Schema, names []string, indexes bool) bool {
	cur := []*openapi3.Schema{s}
	for _, name := range names {
		var next []*openapi3.Schema
		seen := map[*openapi3.Schema]bool{}
		for _, c := range cur {
			collectProperty(c, name, indexes && arrayIndex(name), seen, &next)
		}
		if len(next) == 0 {
			return false
		}
		if slices.Contains(next, anyValue) {
			return true
		}
		cur = next
	}
	return true
}

// arrayIndex reports whether a pointer token is an array index (RFC 6901:
// 0, or digits without a leading zero).
func arrayIndex(tok string) bool {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return false
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// anyValue stands for the values of `additionalProperties: true`, which
// may hold anything.
var anyValue = &openapi3.Schema{}

func collectProperty(s *openapi3.Schema, name string, index bool, seen map[*openapi3.Schema]bool, out *[]*openapi3.Schema) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if p, ok := s.Properties[name]; ok && p != nil && p.Value != nil {
		*out = append(*out, p.Value)
	} else if ap := s.AdditionalProperties; ap.Schema != nil && ap.Schema.Value != nil {
		*out = append(*out, ap.Schema.Value)
	} else if ap.Has != nil && *ap.Has {
		*out = append(*out, anyValue)
	}
	if index && s.Items != nil && s.Items.Value != nil {
		*out = append(*out, s.Items.Value)
	}
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range group {
			if r != nil {
				collectProperty(r.Value, name, index, seen, out)
			}
		}
	}
}
