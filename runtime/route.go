package runtime

import (
	"fmt"
	"net/url"
	"strings"
)

// routePattern is a parsed path template such as "/v1/files/{name}.{ext}".
// Matching is segment by segment, as net/http's ServeMux does: the escaped
// request path is split at its slashes and each segment is unescaped before
// it is compared (so "/ord%65rs/1" is "/orders/1", as the router that runs
// the handler sees it, while "%2F" stays inside its segment). Literals match
// exactly (case-sensitive), a parameter matches a non-empty run of one
// segment, and a trailing slash is significant ("/a/" does not match "/a"
// and vice versa).
type routePattern struct {
	template string
	// shape is the template with parameter names erased, to detect two
	// operations on the same route.
	shape      string
	segs       []routeSeg
	paramNames []string
}

type routeSeg struct {
	literal bool // no parameter in this segment
	parts   []routePart
}

type routePart struct {
	lit   string
	param bool
}

func parseRoute(t string) (*routePattern, error) {
	if !strings.HasPrefix(t, "/") {
		return nil, fmt.Errorf("path %q does not start with /", t)
	}
	rp := &routePattern{template: t}
	var shape strings.Builder
	seen := map[string]bool{}
	for _, s := range strings.Split(t[1:], "/") {
		shape.WriteByte('/')
		seg := routeSeg{literal: true}
		rest := s
		for rest != "" {
			open := strings.IndexByte(rest, '{')
			if open < 0 {
				if strings.IndexByte(rest, '}') >= 0 {
					return nil, fmt.Errorf("path %q: unbalanced }", t)
				}
				seg.parts = append(seg.parts, routePart{lit: rest})
				shape.WriteString(rest)
				break
			}
			if open > 0 {
				lit := rest[:open]
				if strings.IndexByte(lit, '}') >= 0 {
					return nil, fmt.Errorf("path %q: unbalanced }", t)
				}
				seg.parts = append(seg.parts, routePart{lit: lit})
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
			if n := len(seg.parts); n > 0 && seg.parts[n-1].param {
				return nil, fmt.Errorf("path %q: parameter {%s} follows another with nothing between them", t, name)
			}
			seg.parts = append(seg.parts, routePart{lit: name, param: true})
			seg.literal = false
			rp.paramNames = append(rp.paramNames, name)
			shape.WriteString("{}")
			rest = rest[open+end+1:]
		}
		rp.segs = append(rp.segs, seg)
	}
	rp.shape = shape.String()
	return rp, nil
}

// match matches an escaped path and appends the (unescaped) parameter
// values to vals. A segment that does not unescape matches nothing.
func (rp *routePattern) match(path string, vals []string) ([]string, bool) {
	if path == "" || path[0] != '/' {
		return vals, false
	}
	p := path[1:]
	n := len(rp.segs)
	for i := range rp.segs {
		var s string
		j := strings.IndexByte(p, '/')
		if j < 0 {
			if i != n-1 {
				return vals, false
			}
			s, p = p, ""
		} else {
			if i == n-1 {
				return vals, false
			}
			s, p = p[:j], p[j+1:]
		}
		if strings.IndexByte(s, '%') >= 0 {
			u, err := url.PathUnescape(s)
			if err != nil {
				return vals, false
			}
			s = u
		}
		seg := &rp.segs[i]
		if seg.literal {
			if len(seg.parts) == 0 {
				if s != "" {
					return vals, false
				}
				continue
			}
			if s != seg.parts[0].lit {
				return vals, false
			}
			continue
		}
		var ok bool
		if vals, ok = matchSeg(seg.parts, s, vals); !ok {
			return vals, false
		}
	}
	return vals, true
}

func matchSeg(parts []routePart, s string, vals []string) ([]string, bool) {
	pos := 0
	for k, part := range parts {
		if !part.param {
			if !strings.HasPrefix(s[pos:], part.lit) {
				return vals, false
			}
			pos += len(part.lit)
			continue
		}
		var v string
		if k+1 < len(parts) {
			idx := strings.Index(s[pos+1:], parts[k+1].lit)
			if pos >= len(s) || idx < 0 {
				return vals, false
			}
			v = s[pos : pos+1+idx]
		} else {
			v = s[pos:]
		}
		if v == "" {
			return vals, false
		}
		pos += len(v)
		vals = append(vals, v)
	}
	return vals, pos == len(s)
}

// compareSpecificity orders patterns so that the more specific is tried
// first: segment by segment, a literal segment beats a segment with a
// literal prefix or suffix, which beats a bare parameter.
func compareSpecificity(a, b *routePattern) int {
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		sa, sb := segScore(a.segs[i]), segScore(b.segs[i])
		if sa != sb {
			return sb - sa
		}
	}
	return len(b.segs) - len(a.segs)
}

func segScore(s routeSeg) int {
	if s.literal {
		return 2
	}
	if len(s.parts) > 1 {
		return 1
	}
	return 0
}
