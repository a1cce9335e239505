package generator

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/internal/policysyntax"
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
			b.checkFields(r, k.fields, pos, o.Optional)
		}
		if (k.source == KeyHeader || k.source == KeyQuery) && r.kind == InPaths {
			pos := k.namePos
			if !own {
				pos = m.base
			}
			b.checkKeyParam(r, o, k, pos)
		}
	}
	if m.key == nil && !m.unsure("key") && r.kind == InPaths {
		// The default key: only a declaration that contradicts it.
		if p := keyParam(r, &keySpec{source: KeyHeader, name: DefaultKeyHeader}); p != nil {
			b.checkOptionalKey(r, o, p, openapi3.ParameterInHeader)
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

// generationEnv is the environment a policy is validated in at generation
// time: the Options that generated code asks its caller for (a principal
// function for auth operations, a TxStore for transactional ones) are
// taken as given, since their absence is a start-up error of the
// application, not a mistake in the spec.
var generationEnv = idemrt.PolicyEnv{Principal: true, TxStore: true}

// checkRuntime runs the runtime's validators (idemrt.ValidatePolicy) on
// the policy the emitter would write for o, and reports each problem at
// the place in the spec its field comes from: generate refuses what
// NewMiddleware would refuse at start-up.
//
// Only a policy whose every layer decoded cleanly is checked (a rejected
// value would be reported again through its consequences), and the route
// section is checkRoutes' (through policysyntax.ParseRoute, as the runtime
// parses routes).
func (b *builder) checkRuntime(r *opRef, o *Operation, m *merged, at locator) {
	for _, l := range m.layers {
		if l != nil && (l.all || len(l.bad) > 0) {
			return
		}
	}
	for _, fe := range idemrt.ValidatePolicy(&o.Policy, generationEnv) {
		if fe.Section == "route" {
			continue
		}
		b.d.addCause(b.fieldPos(r, m, at, fe.Field), fe, "%s: the middleware would refuse this policy at start-up: %s", extOp, fe.Msg)
	}
}

// fieldPos is where the value of a Policy field comes from: the
// annotation's field that set it (the operation's own, else the defaults'
// at the operation), else the operation's annotation.
func (b *builder) fieldPos(r *opRef, m *merged, at locator, field string) Pos {
	own := m.own()
	written := func(name string) Pos {
		if m.written && own != nil && !own.all {
			if _, ok := own.fields[name]; ok {
				return at(name)
			}
		}
		return m.base
	}
	switch field {
	case "Route", "Method":
		if r.kind == InPaths {
			return b.at("paths", r.path)
		}
		return m.base
	case "FingerprintInclude", "FingerprintExclude":
		if f := m.fingerprint; f != nil && f == own.fingerprint {
			return f.pos
		}
		return m.base
	case "Key", "KeyName", "KeyFields":
		if k := m.key; k != nil && k == own.key {
			if k.source == KeyFields {
				return k.fieldsPos
			}
			return k.namePos
		}
		return m.base
	case "TTL":
		return m.durationPos("ttl", "lease")
	case "Lease":
		return m.durationPos("lease")
	case "Wait":
		return m.durationPos("wait")
	case "ReplayHeaders":
		return written("replay-headers")
	case "Save":
		return written("save")
	case "MaxResponseBytes":
		return written("max-response-bytes")
	case "MaxRequestBytes":
		return written("max-request-bytes")
	case "Transactional":
		return written("transactional")
	case "Principal", "Challenges":
		return written("principal")
	}
	return m.base
}

// safeMethod reports the methods RFC 9110 §9.2.1 defines as safe.
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// checkFields reports key.fields paths the JSON request body lacks, and
// warns about the other body types the operation accepts: no key comes
// from them (optional: the key is not required).
func (b *builder) checkFields(r *opRef, fields []string, pos Pos, optional bool) {
	schemas := jsonBodySchemas(r.op)
	if len(schemas) == 0 && b.bodyRefCycle(r) {
		return
	}
	if len(schemas) == 0 {
		b.d.add(pos, "%s.key.fields: operation %s has no JSON request body to take the fields from", extOp, describeRef(r))
		return
	}
	for _, f := range fields {
		if !anyHasPath(schemas, strings.Split(f, "."), false) {
			b.d.add(pos, "%s.key.fields: %q is not a property of the request body of %s", extOp, f, describeRef(r))
		}
	}
	if other := nonJSONBodyTypes(r.op); len(other) > 0 {
		effect := "the middleware answers every such request 400 key-missing"
		if optional {
			effect = "every such request runs unprotected (required: false), a retry running the handler again"
		}
		b.w.addAs(SeverityWarning, pos, "%s.key.fields: %s also accepts %s request bodies, from which no key can be derived: "+
			"%s (accept JSON only, or take the key from a header)", extOp, describeRef(r), strings.Join(other, ", "), effect)
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
	if len(schemas) == 0 && b.bodyRefCycle(r) {
		return
	}
	if len(schemas) == 0 {
		b.d.add(pos, "%s: operation %s has no JSON request body; include and exclude select parts of a JSON body, so they would have no effect (%s)",
			where, describeRef(r), bodyKinds(r.op))
		return
	}
	for _, p := range list {
		toks, err := policysyntax.SplitPointer(p)
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

// keyParam returns the parameter of r (or its path item) that the key's
// header or query parameter is, or nil.
func keyParam(r *opRef, k *keySpec) *openapi3.ParameterRef {
	for _, list := range []openapi3.Parameters{r.op.Parameters, r.item.Parameters} {
		for _, p := range list {
			if p != nil && p.Value != nil && sameParam(p.Value, k.source, k.name) {
				return p
			}
		}
	}
	return nil
}

// sameParam reports whether p is the key's parameter: a header named the
// same but for case, or a query parameter named exactly the same.
func sameParam(p *openapi3.Parameter, src KeySource, name string) bool {
	switch src {
	case KeyHeader:
		return p.In == openapi3.ParameterInHeader && strings.EqualFold(p.Name, name)
	case KeyQuery:
		return p.In == openapi3.ParameterInQuery && p.Name == name
	}
	return false
}

// paramIn is the OpenAPI location of a header or query key.
func paramIn(src KeySource) string {
	if src == KeyQuery {
		return openapi3.ParameterInQuery
	}
	return openapi3.ParameterInHeader
}

// checkKeyParam compares the key's header or query parameter with the
// parameters r declares. A declared parameter the key name is a likely
// misspelling of is an error: clients built from the spec send that one,
// and the middleware, reading the annotation's, answers every request
// 400. An undeclared key, and a declared one the annotation requires
// while the spec says it is optional, are warnings: the middleware does
// what the annotation says, and idemgen spec publishes the contract
// corrected (the parameter added, or marked required).
func (b *builder) checkKeyParam(r *opRef, o *Operation, k *keySpec, pos Pos) {
	in := paramIn(k.source)
	p := keyParam(r, k)
	if p == nil {
		var declared []string
		var elsewhere *openapi3.Parameter // of the key's name (but for case and separators), in another place
		for _, v := range r.params() {
			if hidden(v.Extensions) {
				return // it may be the key's; its $ref is reported
			}
			if v.In == in {
				declared = append(declared, v.Name)
			} else if elsewhere == nil && normParam(v.Name) == normParam(k.name) {
				elsewhere = v
			}
		}
		meant := suggestParam(k.name, declared)
		if meant == "" && elsewhere != nil {
			fix := fmt.Sprintf("write key: {%s: %s}, or declare it in: %s", elsewhere.In, elsewhere.Name, in)
			if elsewhere.In != "header" && elsewhere.In != "query" {
				fix = fmt.Sprintf("declare it in: %s; idemgen reads a key from a header or the query, not a %s", in, elsewhere.In)
			}
			b.d.add(pos, "%s.key.%s: %s declares %s as a %s parameter, not a %s one: clients built from the spec send it in the %s, "+
				"and the middleware, reading the %s, would answer every request with 400 (%s)",
				extOp, in, describeRef(r), elsewhere.Name, elsewhere.In, in, elsewhere.In, in, fix)
			return
		}
		if meant != "" {
			b.d.add(pos, "%s.key.%s: %s declares no %s parameter %s (did you mean %s, which it declares?): clients built from the spec send %s, and the middleware would answer every request without %s with 400",
				extOp, in, describeRef(r), in, k.name, meant, meant, k.name)
			return
		}
		b.w.addAs(SeverityWarning, pos, "%s.key.%s: %s does not declare the %s parameter %s, so clients generated from the spec will not know to send it (declare it in the operation's parameters, in: %s; idemgen spec publishes it)",
			extOp, in, describeRef(r), in, k.name, in)
		return
	}
	b.checkOptionalKey(r, o, p, in)
}

// checkOptionalKey notes p, r's key parameter, when the spec declares it
// optional and the annotation requires it.
func (b *builder) checkOptionalKey(r *opRef, o *Operation, p *openapi3.ParameterRef, in string) {
	if !p.Value.Required && !o.Optional {
		at := b.paramPos(r, p)
		b.optionalKeys[at] = append(b.optionalKeys[at], optionalKey{r: r, in: in, name: p.Value.Name})
	}
}

// optionalKey is an operation whose annotation requires a key that the
// spec declares optional, for the warning (one per declaration).
type optionalKey struct {
	r        *opRef
	in, name string
}

// reportOptionalKeys warns, once per parameter declaration, about the key
// parameters declared optional that the annotations require.
func (b *builder) reportOptionalKeys() {
	for at, list := range b.optionalKeys {
		ops := make([]string, len(list))
		for i, x := range list {
			ops[i] = describeRef(x.r)
		}
		slices.Sort(ops)
		what := ops[0]
		if len(ops) > 1 {
			what = fmt.Sprintf("%d operations (%s)", len(ops), strings.Join(ops, ", "))
		}
		b.w.addAs(SeverityWarning, at, "the %s parameter %s is declared optional (no required: true), but %s requires it on %s: a client that leaves it out gets 400; declare it required (idemgen spec publishes it required), or write required: false in the annotation if a request without a key should run unprotected",
			list[0].in, list[0].name, extOp, what)
	}
}

// paramPos is where the declaration of p, a parameter of r, is written:
// its required key (or the parameter) in the components it names, else
// the parameter in the parameters of the operation or path item.
func (b *builder) paramPos(r *opRef, p *openapi3.ParameterRef) Pos {
	list, i := r.field("parameters"), slices.Index(r.op.Parameters, p)
	if i < 0 {
		list, i = append(slices.Clone(r.keys[:len(r.keys)-1]), "parameters"), slices.Index(r.item.Parameters, p)
	}
	fallback := b.at(append(list, strconv.Itoa(i))...)
	if frag, ok := strings.CutPrefix(p.Ref, "#/"); ok && p.Ref != "" {
		keys := pointerKeys(frag)
		at := b.at(append(keys, "required")...)
		if at.Line == 0 || at.File != fallback.File {
			return fallback
		}
		return at
	}
	return fallback
}

// normParam is a parameter name without case and separators: request_id,
// requestId and Request-Id are one.
func normParam(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "", ".", "").Replace(s))
}

// suggestParam returns the declared parameter name that name is a likely
// misspelling of: the same but for case and separators (request_id,
// requestId, Request-Id), or within two edits.
func suggestParam(name string, declared []string) string {
	for _, d := range declared {
		if normParam(d) == normParam(name) {
			return d
		}
	}
	lower := make([]string, len(declared))
	for i, d := range declared {
		lower[i] = strings.ToLower(d)
	}
	if s := suggest(strings.ToLower(name), lower); s != "" {
		return declared[slices.Index(lower, s)]
	}
	return ""
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
