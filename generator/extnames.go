package generator

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// The extensions idemgen reads are looked for by their exact names, so a
// misspelt one (x-idempotency, X-Idempotent, x-idempotent-default) or one
// written where idemgen does not look (x-idempotent-defaults under info)
// would be ignored, and the operations would run with other policies than
// the author wrote. These checks find them.

// misspeltExt returns the extension idemgen reads that name is a likely
// misspelling of (another case, or within two edits), or "".
func misspeltExt(name string) string {
	if name == extOp || name == extDefaults {
		return ""
	}
	l := strings.ToLower(name)
	for _, known := range []string{extOp, extDefaults} {
		if l == known {
			return known
		}
	}
	return suggest(l, []string{extOp, extDefaults})
}

// meantExt returns the extension idemgen reads that name is, exactly or
// as a likely misspelling, or "".
func meantExt(name string) string {
	if name == extOp || name == extDefaults {
		return name
	}
	return misspeltExt(name)
}

// checkExtNames reports the misspelt idemgen extensions among exts, the
// extensions of the object found under keys (where names it, for the
// message: "the document root", "an operation"). An exact name is not
// reported here: whether it belongs there is the caller's check.
func (b *builder) checkExtNames(exts map[string]any, keys []string, where string, effect func(meant string) string) {
	for _, name := range slices.Sorted(maps.Keys(exts)) {
		meant := misspeltExt(name)
		if meant == "" {
			continue
		}
		b.d.add(b.at(append(slices.Clip(keys), name)...), "unknown extension %s on %s (did you mean %s?): idemgen does not read it, so %s",
			name, where, meant, effect(meant))
	}
}

// ignoredDefaults says what ignoring a misspelt or misplaced defaults
// extension does.
const ignoredDefaults = "every operation takes the contract's defaults (key header Idempotency-Key, ttl 24h...) instead of these"

// extEffect says what ignoring a misspelt extension meant as meant does
// where it is written.
func extEffect(onOperation bool) func(meant string) string {
	return func(meant string) string {
		switch {
		case meant == extDefaults:
			return ignoredDefaults
		case onOperation:
			return "the operation is left unprotected"
		}
		return "it has no effect"
	}
}

// checkMisplacedDefaults reports the idemgen extensions, exact or
// misspelt, written on an object of the document other than the root, an
// operation or a path item, where they have no effect: info, components,
// paths.
func (b *builder) checkMisplacedDefaults() {
	type place struct {
		exts  map[string]any
		keys  []string
		where string
	}
	var places []place
	if b.doc.Info != nil {
		places = append(places, place{b.doc.Info.Extensions, []string{"info"}, "info"})
	}
	if b.doc.Components != nil {
		places = append(places, place{b.doc.Components.Extensions, []string{"components"}, "components"})
	}
	if b.doc.Paths != nil {
		places = append(places, place{b.doc.Paths.Extensions, []string{"paths"}, "paths"})
	}
	for _, p := range places {
		for _, name := range slices.Sorted(maps.Keys(p.exts)) {
			meant := meantExt(name)
			if meant == "" {
				continue
			}
			what := name
			if meant != name {
				what += " (did you mean " + meant + "?)"
			}
			pos := b.at(append(slices.Clip(p.keys), name)...)
			if meant == extDefaults {
				b.d.add(pos, "%s under %s is not read: document-wide defaults go at the document root, so %s", what, p.where, ignoredDefaults)
			} else {
				b.d.add(pos, "%s under %s is not read: it belongs on an operation (post, put...)", what, p.where)
			}
		}
	}
}

// strayPlace is an object inside an operation whose extensions idemgen
// does not read.
type strayPlace struct {
	exts  map[string]any
	keys  []string // from the operation's key
	where string   // for the message: "responses", "the 200 response"
}

// strayKey is an annotation reported by reportStray: where it is written,
// and which. Where the locator stops short (a YAML alias it does not
// follow; a run without positions), two places share the position it
// stopped at: the keys it could not follow still tell them apart.
type strayKey struct {
	pos              Pos
	unfollowed, name string
}

// reportStray reports the idemgen extensions, exact or misspelt, written
// on places (found under the keys base) where idemgen does not read them:
// under an operation's requestBody, responses, a response, a media type, a
// parameter, a server or a callback, or a path item's parameters or
// servers. A line indented one step too deep puts x-idempotent there, and
// the operation would run unprotected without a word. owner names the
// operation or path item for the message. A place is reported once: a
// $ref'd response shared by several operations, where it is written.
func (b *builder) reportStray(places []strayPlace, base []string, owner string) {
	for _, p := range places {
		for _, name := range slices.Sorted(maps.Keys(p.exts)) {
			meant := meantExt(name)
			if meant == "" {
				continue
			}
			pos, unfollowed := b.files.findRest(append(append(slices.Clip(base), p.keys...), name)...)
			k := strayKey{pos, strings.Join(unfollowed, "\x00"), name}
			if b.strayReported[k] {
				continue
			}
			b.strayReported[k] = true
			what := name
			if meant != name {
				what += " (did you mean " + meant + "?)"
			}
			if meant == extDefaults {
				b.d.add(pos, "%s under %s of %s is not read: document-wide defaults go at the document root, so %s",
					what, p.where, owner, ignoredDefaults)
				continue
			}
			b.d.add(pos, "%s under %s of %s is not read: it belongs on an operation (post, put...), beside its operationId; where it is, the operation is left unprotected",
				what, p.where, owner)
		}
	}
}

// strayPlaces lists the objects inside op that can carry extensions
// idemgen does not read.
func strayPlaces(op *openapi3.Operation) []strayPlace {
	var out []strayPlace
	add := func(exts map[string]any, where string, keys ...string) {
		if len(exts) > 0 {
			out = append(out, strayPlace{exts: exts, keys: keys, where: where})
		}
	}
	addContent := func(c openapi3.Content, where string, keys ...string) {
		for _, mt := range slices.Sorted(maps.Keys(c)) {
			if c[mt] == nil {
				continue
			}
			k := append(slices.Clip(keys), "content", mt)
			add(c[mt].Extensions, "the "+mt+" content of "+where, k...)
			if s := c[mt].Schema; s != nil && s.Value != nil {
				add(s.Value.Extensions, "the "+mt+" schema of "+where, append(k, "schema")...)
			}
		}
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		add(rb.Value.Extensions, "the requestBody", "requestBody")
		addContent(rb.Value.Content, "the requestBody", "requestBody")
	}
	if op.Responses != nil {
		add(op.Responses.Extensions, "responses", "responses")
		m := op.Responses.Map()
		for _, code := range slices.Sorted(maps.Keys(m)) {
			if m[code] == nil || m[code].Value == nil {
				continue
			}
			where := "the " + code + " response"
			add(m[code].Value.Extensions, where, "responses", code)
			addContent(m[code].Value.Content, where, "responses", code)
		}
	}
	var servers openapi3.Servers
	if op.Servers != nil {
		servers = *op.Servers
	}
	out = append(out, paramServerPlaces(op.Parameters, servers)...)
	for _, name := range slices.Sorted(maps.Keys(op.Callbacks)) {
		if cb := op.Callbacks[name]; cb != nil && cb.Value != nil {
			add(cb.Value.Extensions, "the callback "+name, "callbacks", name)
		}
	}
	return out
}

// paramServerPlaces lists the parameters and servers of an operation or a
// path item.
func paramServerPlaces(params openapi3.Parameters, servers openapi3.Servers) []strayPlace {
	var out []strayPlace
	for i, p := range params {
		if p != nil && p.Value != nil && len(p.Value.Extensions) > 0 {
			where := "the " + p.Value.In + " parameter " + p.Value.Name
			out = append(out, strayPlace{exts: p.Value.Extensions, keys: []string{"parameters", strconv.Itoa(i)}, where: where})
		}
	}
	for i, s := range servers {
		if s != nil && len(s.Extensions) > 0 {
			where := "the server " + s.URL
			out = append(out, strayPlace{exts: s.Extensions, keys: []string{"servers", strconv.Itoa(i)}, where: where})
		}
	}
	return out
}
