package generator

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// The checks of one operation's merged annotation that involve several
// fields, or the operation itself (its method, request body, parameters).

// merged records, for the checks, where an operation's merged annotation
// took its values from.
type merged struct {
	// base is the operation's x-idempotent key (or the operation, for
	// -annotate-mutating).
	base Pos
	// layers are the document's defaults (nil when there are none), then
	// the operation's own annotation.
	layers      []*annotation
	key         *keySpec
	fingerprint *fingerprintSpec
	// written: the operation's annotation is in the spec (not
	// -annotate-mutating's).
	written bool
}

// unsure reports whether the value of field that applies after layering
// was rejected: checks that depend on it are skipped, so that one mistake
// is reported once, not again through its consequences.
func (m *merged) unsure(field string) bool {
	u := false
	for _, l := range m.layers {
		switch {
		case l == nil:
		case l.unsure(field):
			u = true
		case l.has(field):
			u = false
		}
	}
	return u
}

// own is the operation's own annotation layer.
func (m *merged) own() *annotation { return m.layers[len(m.layers)-1] }

// durationPos is where to report a problem between duration fields: the
// first of them the operation's own annotation writes, else the first the
// defaults write, else the operation.
func (m *merged) durationPos(fields ...string) Pos {
	for i := len(m.layers) - 1; i >= 0; i-- {
		if l := m.layers[i]; l != nil {
			for _, f := range fields {
				if d := l.duration(f); d != nil {
					return d.pos
				}
			}
		}
	}
	return m.base
}

// has reports whether the layer sets field to a valid value.
func (a *annotation) has(field string) bool {
	switch field {
	case "key":
		return a.key != nil
	case "fingerprint":
		return a.fingerprint != nil
	case "required":
		return a.required != nil
	}
	return a.duration(field) != nil
}

func (a *annotation) duration(field string) *durationAt {
	switch field {
	case "ttl":
		return a.ttl
	case "lease":
		return a.lease
	case "wait":
		return a.wait
	}
	return nil
}

// checkPolicy makes the checks of o's merged annotation that involve
// several of its fields or the operation r.
func (b *builder) checkPolicy(r *opRef, o *Operation, m *merged) {
	b.checkStreaming(r, m.base)
	if safeMethod(r.method) && m.written {
		why := "clients, caches and crawlers repeat it without a key, and every such request would get 400"
		if o.Optional && !m.unsure("required") {
			why = "a repeat that sends a key would be answered with a saved response instead of the current state"
		}
		b.d.add(m.base, "%s on %s: %s is safe by definition (RFC 9110 §9.2.1): %s; remove the annotation",
			extOp, describeRef(r), r.method, why)
	}
	if !m.unsure("ttl") && !m.unsure("lease") && o.TTL < o.Lease {
		b.d.add(m.durationPos("ttl", "lease"), "%s: ttl (%s) is shorter than lease (%s); a record must outlive its claim", extOp, o.TTL, o.Lease)
	}
	if !m.unsure("wait") && !m.unsure("lease") && o.Wait > o.Lease {
		b.d.add(m.durationPos("wait", "lease"), "%s: wait (%s) is longer than lease (%s); a duplicate still waiting when the lease ends takes the claim over and runs the handler again, even while the first attempt is live (wait at most the lease, and make the lease cover the handler's longest run)",
			extOp, o.Wait, o.Lease)
	}
	if k := m.key; k != nil && !m.unsure("key") {
		own := k == m.own().key
		if k.source == KeyFields {
			pos := k.fieldsPos
			if !own {
				// The place to report is the operation, which lacks the
				// default's fields.
				pos = m.base
			}
			b.checkFields(r, k.fields, pos)
		}
		if (k.source == KeyHeader || k.source == KeyQuery) && r.kind == InPaths && !declaresParam(r, k) {
			pos := k.namePos
			if !own {
				pos = m.base
			}
			in := openapi3.ParameterInHeader
			if k.source == KeyQuery {
				in = openapi3.ParameterInQuery
			}
			b.advice.add(pos, "warning: %s.key.%s: %s does not declare the %s parameter %s, so clients generated from the spec will not know to send it (declare it in the operation's parameters, in: %s)",
				extOp, in, describeRef(r), in, k.name, in)
		}
	}
	if f := m.fingerprint; f != nil && !m.unsure("fingerprint") {
		pos := f.pos
		if f != m.own().fingerprint {
			pos = m.base
		}
		b.checkPointers(r, f, pos)
	}
}

// safeMethod reports the methods RFC 9110 §9.2.1 defines as safe.
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// checkFields reports key.fields paths the JSON request body lacks.
func (b *builder) checkFields(r *opRef, fields []string, pos Pos) {
	schemas := jsonBodySchemas(r.op)
	if len(schemas) == 0 {
		b.d.add(pos, "%s.key.fields: operation %s has no JSON request body to take the fields from", extOp, describeRef(r))
		return
	}
	for _, f := range fields {
		if !anyHasPath(schemas, strings.Split(f, "."), false) {
			b.d.add(pos, "%s.key.fields: %q is not a property of the request body of %s", extOp, f, describeRef(r))
		}
	}
}

// checkPointers reports fingerprint pointers that select nothing in the
// JSON request body, and pointers on an operation without a JSON body,
// whose fingerprint they cannot change.
func (b *builder) checkPointers(r *opRef, f *fingerprintSpec, pos Pos) {
	where, list, effect := extOp+".fingerprint.include", f.include, "compares nothing"
	if f.exclude != nil {
		where, list, effect = extOp+".fingerprint.exclude", f.exclude, "leaves nothing out"
	}
	schemas := jsonBodySchemas(r.op)
	if len(schemas) == 0 {
		b.d.add(pos, "%s: operation %s has no JSON request body; include and exclude select parts of a JSON body, so they would have no effect (%s)",
			where, describeRef(r), bodyKinds(r.op))
		return
	}
	for _, p := range list {
		toks, err := idemrt.PointerTokens(p)
		if err != nil {
			continue // reported when decoded
		}
		if !anyHasPath(schemas, toks, true) {
			b.d.add(pos, "%s: %q is not a property of the request body of %s (a pointer that selects nothing %s)", where, p, describeRef(r), effect)
		}
	}
}

// bodyKinds says what the operation's request body is, for a message.
func bodyKinds(op *openapi3.Operation) string {
	if op.RequestBody == nil || op.RequestBody.Value == nil || len(op.RequestBody.Value.Content) == 0 {
		return "it has no request body"
	}
	types := slices.Sorted(maps.Keys(op.RequestBody.Value.Content))
	return "its " + strings.Join(types, ", ") + " body is fingerprinted whole"
}

// declaresParam reports whether r (or its path item) declares the key's
// header or query parameter.
func declaresParam(r *opRef, k *keySpec) bool {
	return slices.ContainsFunc(r.params(), func(p *openapi3.Parameter) bool {
		switch k.source {
		case KeyHeader:
			return p.In == openapi3.ParameterInHeader && strings.EqualFold(p.Name, k.name)
		case KeyQuery:
			return p.In == openapi3.ParameterInQuery && p.Name == k.name
		}
		return false
	})
}

// checkSharedIDs reports an operationId shared by an annotated operation
// and one that is not (two annotated ones are a Go name collision): the
// annotated one's policy, Wrap function and default scope are named after
// an id that also names another operation.
func (b *builder) checkSharedIDs() {
	byID := map[string][]*opRef{}
	for _, r := range b.refs {
		if id := r.op.OperationID; id != "" {
			byID[id] = append(byID[id], r)
		}
	}
	for _, r := range b.refs {
		if b.annotated[r] || r.op.OperationID == "" {
			continue
		}
		for _, other := range byID[r.op.OperationID] {
			if b.annotated[other] {
				b.d.add(b.at(r.field("operationId")...), "operation %s: its operationId %s is also that of the annotated %s, whose policy, Wrap function and default scope are named after it; operationIds must be unique (OpenAPI), set a distinct one",
					describeRef(r), r.op.OperationID, describeRef(other))
				break
			}
		}
	}
}
