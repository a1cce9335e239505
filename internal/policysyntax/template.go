package policysyntax

import (
	"fmt"
	"strings"
)

// Template is a parsed path template such as "/v1/files/{name}.{ext}":
// the segments between its slashes, each a run of literals and parameters.
type Template struct {
	// Segments are the template's segments, the first after its leading /.
	Segments []Segment
	// Params are the parameter names in the order they appear.
	Params []string
	// Shape is the template with its parameter names erased
	// ("/a/{id}.{ext}" -> "/a/{}.{}"): two templates of one shape match the
	// same requests.
	Shape string
}

// Segment is one segment of a template.
type Segment struct {
	// Literal: the segment holds no parameter (Parts is its one literal,
	// or empty for an empty segment).
	Literal bool
	Parts   []Part
}

// Part is a literal or a parameter of a segment.
type Part struct {
	// Text is the literal, or the parameter's name.
	Text  string
	Param bool
}

// ParseRoute parses a route as a policy names it: a path template that
// holds no query string or fragment. A request's path never holds one, so
// such a route would never match and its operation would run unprotected.
func ParseRoute(t string) (*Template, error) {
	if i := strings.IndexAny(t, "?#"); i >= 0 {
		return nil, fmt.Errorf("path %q holds a query string or fragment (%s), which no request's path does, so it would never match", t, t[i:])
	}
	return ParseTemplate(t)
}

// ParseTemplate parses a path template: it starts with /, its braces are
// balanced, each parameter has a name of its own, and no two parameters of
// a segment touch.
func ParseTemplate(t string) (*Template, error) {
	if !strings.HasPrefix(t, "/") {
		return nil, fmt.Errorf("path %q does not start with /", t)
	}
	pt := &Template{}
	var shape strings.Builder
	seen := map[string]bool{}
	for _, s := range strings.Split(t[1:], "/") {
		shape.WriteByte('/')
		seg := Segment{Literal: true}
		rest := s
		for rest != "" {
			open := strings.IndexByte(rest, '{')
			if open < 0 {
				if strings.IndexByte(rest, '}') >= 0 {
					return nil, fmt.Errorf("path %q: unbalanced }", t)
				}
				seg.Parts = append(seg.Parts, Part{Text: rest})
				shape.WriteString(rest)
				break
			}
			if open > 0 {
				lit := rest[:open]
				if strings.IndexByte(lit, '}') >= 0 {
					return nil, fmt.Errorf("path %q: unbalanced }", t)
				}
				seg.Parts = append(seg.Parts, Part{Text: lit})
				shape.WriteString(lit)
			}
			end := strings.IndexByte(rest[open:], '}')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed {", t)
			}
			name := rest[open+1 : open+end]
			if name == "" || strings.ContainsAny(name, "{") {
				return nil, fmt.Errorf("path %q: bad parameter name %q", t, name)
			}
			if seen[name] {
				return nil, fmt.Errorf("path %q: parameter {%s} appears twice", t, name)
			}
			seen[name] = true
			if n := len(seg.Parts); n > 0 && seg.Parts[n-1].Param {
				return nil, fmt.Errorf("path %q: parameter {%s} follows another with nothing between them", t, name)
			}
			seg.Parts = append(seg.Parts, Part{Text: name, Param: true})
			seg.Literal = false
			pt.Params = append(pt.Params, name)
			shape.WriteString("{}")
			rest = rest[open+end+1:]
		}
		pt.Segments = append(pt.Segments, seg)
	}
	pt.Shape = shape.String()
	return pt, nil
}
