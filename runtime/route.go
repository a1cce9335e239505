package runtime

import (
	"net/url"
	"strings"

	"github.com/idemgen/idemgen/internal/policysyntax"
)

// routePattern is a parsed path template such as "/v1/files/{name}.{ext}"
// (policysyntax parses it). Matching is segment by segment, as net/http's
// ServeMux does: the escaped request path is split at its slashes and each
// segment is unescaped before it is compared (so "/ord%65rs/1" is
// "/orders/1", as the router that runs the handler sees it, while "%2F"
// stays inside its segment). Literals match exactly (case-sensitive), a
// parameter matches a non-empty run of one segment, and a trailing slash is
// significant ("/a/" does not match "/a" and vice versa).
type routePattern struct {
	template string
	// shape is the template with parameter names erased, to detect two
	// operations on the same route.
	shape      string
	segs       []policysyntax.Segment
	paramNames []string
}

// parseRoute parses a path template (a base path, or a base path and a
// route).
func parseRoute(t string) (*routePattern, error) {
	return newRoutePattern(t, policysyntax.ParseTemplate)
}

// checkRoute parses a policy's route, which may hold no query string or
// fragment (policysyntax.ParseRoute).
func checkRoute(t string) (*routePattern, error) {
	return newRoutePattern(t, policysyntax.ParseRoute)
}

func newRoutePattern(t string, parse func(string) (*policysyntax.Template, error)) (*routePattern, error) {
	pt, err := parse(t)
	if err != nil {
		return nil, err
	}
	return &routePattern{template: t, shape: pt.Shape, segs: pt.Segments, paramNames: pt.Params}, nil
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
		if seg.Literal {
			if len(seg.Parts) == 0 {
				if s != "" {
					return vals, false
				}
				continue
			}
			if s != seg.Parts[0].Text {
				return vals, false
			}
			continue
		}
		var ok bool
		if vals, ok = matchSeg(seg.Parts, s, vals); !ok {
			return vals, false
		}
	}
	return vals, true
}

func matchSeg(parts []policysyntax.Part, s string, vals []string) ([]string, bool) {
	pos := 0
	for k, part := range parts {
		if !part.Param {
			if !strings.HasPrefix(s[pos:], part.Text) {
				return vals, false
			}
			pos += len(part.Text)
			continue
		}
		var v string
		if k+1 < len(parts) {
			if pos >= len(s) {
				return vals, false
			}
			idx := strings.Index(s[pos+1:], parts[k+1].Text)
			if idx < 0 {
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

func segScore(s policysyntax.Segment) int {
	if s.Literal {
		return 2
	}
	if len(s.Parts) > 1 {
		return 1
	}
	return 0
}
