package generator

import (
	"maps"
	"slices"
	"strings"
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
			meant := name
			if name != extOp && name != extDefaults {
				meant = misspeltExt(name)
			}
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
