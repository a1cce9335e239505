package generator

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/internal/policysyntax"
	idemrt "github.com/idemgen/idemgen/runtime"
)

const (
	extOp       = "x-idempotent"
	extDefaults = "x-idempotent-defaults"
)

// builder builds the model of one document.
type builder struct {
	cfg      Config
	doc      *openapi3.T
	files    *specFiles
	d        diags
	w        diags // warnings: generation goes on
	defaults *annotation
	ops      []*Operation
	// refs are every operation of the document (callbacks after their
	// parent), in the order run found them; annotated are those that
	// carry (or were given) an annotation.
	refs []*opRef
	// strayReported holds the annotations already reported as written
	// where they are not read (reportStray).
	strayReported map[strayKey]bool
	annotated     map[*opRef]bool
	// optOuts are the operations deliberately left unprotected, and
	// optOutReasons those that say why.
	optOuts       []*OptOut
	optOutReasons map[*opRef]string
	// optionalKeys are the operations whose annotation requires a key
	// the spec declares optional, by the place of the declaration.
	optionalKeys map[Pos][]optionalKey
	// advice are Lint's own findings and warnings, which generation does
	// not look for (unannotated operations, API design).
	advice diags
}

func build(ctx context.Context, cfg Config, data []byte) (*Model, Diagnostics, error) {
	b, err := load(ctx, cfg, data)
	if err != nil {
		return nil, nil, err
	}
	return b.model()
}

// model runs the builder and returns the model, or every problem found.
//
// A run that finds nothing to report needs no positions, so the first run
// asks for none (each costs a look into the text, and the first look
// indexes it); when it finds something, a second run on the same loaded
// document places the diagnostics.
func (b *builder) model() (*Model, Diagnostics, error) {
	cfg := b.cfg
	fresh := *b
	b.files.noPos = true
	b.run()
	b.files.noPos = false
	if len(b.d.list) > 0 || len(b.w.list) > 0 {
		*b = fresh
		b.run()
	}
	if len(b.d.list) > 0 {
		// Every finding of the run, the warnings with the errors.
		return nil, nil, slices.Concat(b.d.list, b.w.list).sorted()
	}
	slices.SortFunc(b.ops, func(x, y *Operation) int { return strings.Compare(x.GoName, y.GoName) })
	return &Model{Package: cfg.Package, SpecName: filepath.Base(cfg.Spec), Operations: b.ops, OptOuts: b.optOuts}, b.w.list.sorted(), nil
}

// load loads the document, and the files its $refs name, and returns a
// builder for it; its errors are Diagnostics. The loader records no
// positions (see package location).
func load(ctx context.Context, cfg Config, data []byte) (*builder, error) {
	files := newSpecFiles(cfg, data)
	var doc *openapi3.T
	// Repeated keys are reported and taken out of the text the loader
	// reads, the last of each kept, so that the document's other problems
	// are found in the same run: a JSON file's before the loader reads it
	// (it would keep the last silently), a YAML file's when the loader
	// refuses it, each such attempt taking them out of one file. So are
	// files other than the main one that do not parse (see unparsable)
	// and $refs that cannot be followed (see unref).
	for attempts := 0; ; attempts++ {
		loader := openapi3.NewLoader()
		loader.Context = ctx
		// readURI decides which $refs are followed.
		loader.IsExternalRefsAllowed = true
		loader.ReadFromURIFunc = files.readURI
		var err error
		doc, err = loadDoc(loader, files.give(files.main), cfg.Spec)
		if err == nil {
			break
		}
		if attempts == maxDedupes || !files.dedupe(err) && !files.unparsable(err) && !files.unref(err) {
			return nil, slices.Concat(files.loadErrors(err), files.repeats, files.syntax, files.unrefs).sorted()
		}
	}
	dups := diags{list: slices.Concat(files.repeats, files.syntax, files.unrefs)}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		// A Swagger 2.0 document (or any other) decodes to an empty one.
		msg := fmt.Sprintf("not an OpenAPI 3.0 or 3.1 document (its openapi field is %q)", doc.OpenAPI)
		if doc.OpenAPI == "" {
			msg = "not an OpenAPI 3.0 or 3.1 document (no openapi field; convert Swagger 2.0 documents first)"
		}
		d := Diagnostic{Pos: files.find("openapi"), Msg: msg}
		if p := files.find("swagger"); p.Line > 0 {
			d.Pos = p
		}
		if d.Pos.Line > 0 {
			d.Frame = files.main.Frame(d.Pos)
		}
		return nil, append(Diagnostics{d}, dups.list...).sorted()
	}
	return &builder{cfg: cfg, doc: doc, files: files, d: dups}, nil
}

// maxDedupes bounds the load attempts after YAML's duplicate keys (one
// per file), files other than the main one that do not parse (one each)
// and $refs that cannot be followed (one target each).
const maxDedupes = 32

// loadDoc loads with kin-openapi, turning its panics (it has had some on
// malformed input) into errors.
func loadDoc(loader *openapi3.Loader, data []byte, name string) (doc *openapi3.T, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("the loader failed: %v", r)
		}
	}()
	return loader.LoadFromDataWithPath(data, &url.URL{Path: filepath.ToSlash(name)})
}

// at returns the position of the key reached by following keys from the
// document's root (through $refs, into other files): the last one found.
func (b *builder) at(keys ...string) Pos { return b.files.find(keys...) }

// locator locates the keys of an annotation found under keys.
func (b *builder) locator(keys []string) locator {
	return func(path ...string) Pos {
		return b.at(append(slices.Clip(keys), path...)...)
	}
}

// opRef is one operation found in the document, before decoding.
type opRef struct {
	kind         OpKind
	method, path string
	op           *openapi3.Operation
	item         *openapi3.PathItem
	callback     string
	parent       *opRef
	// keys lead from the document's root to the operation's key.
	keys []string
}

// field is the keys to a field of the operation.
func (r *opRef) field(name string) []string { return append(slices.Clip(r.keys), name) }

// params are the parameters the operation declares, its own first, then
// its path item's.
func (r *opRef) params() []*openapi3.Parameter {
	var out []*openapi3.Parameter
	for _, list := range []openapi3.Parameters{r.op.Parameters, r.item.Parameters} {
		for _, p := range list {
			if p != nil && p.Value != nil {
				out = append(out, p.Value)
			}
		}
	}
	return out
}

func (b *builder) run() {
	if v, ok := b.doc.Extensions[extDefaults]; ok {
		// On errors the operations go on with the contract's defaults, so
		// that their own problems are reported in the same run.
		b.defaults = decodeAnnotation(extDefaults, v, b.locator([]string{extDefaults}), &b.d)
	}
	if _, ok := b.doc.Extensions[extOp]; ok {
		b.d.add(b.at(extOp), "%s belongs on an operation; document-wide defaults go in %s", extOp, extDefaults)
	}
	b.checkExtNames(b.doc.Extensions, nil, "the document root", extEffect(false))
	b.checkMisplacedDefaults()
	b.refs, b.strayReported = nil, map[strayKey]bool{}
	if b.doc.Paths != nil {
		m := b.doc.Paths.Map()
		for _, path := range slices.Sorted(maps.Keys(m)) {
			item, keys := m[path], []string{"paths", path}
			b.checkPathItem(item, keys)
			for _, r := range itemOps(item, InPaths, path, keys) {
				b.refs = append(b.refs, r)
				b.refs = append(b.refs, callbackOps(r)...)
			}
		}
	}
	if b.doc.Paths != nil {
		b.checkPathItemCycles(b.doc.Paths.Map(), "paths")
	}
	b.checkPathItemCycles(b.doc.Webhooks, "webhooks")
	for _, name := range slices.Sorted(maps.Keys(b.doc.Webhooks)) {
		keys := []string{"webhooks", name}
		b.checkPathItem(b.doc.Webhooks[name], keys)
		for _, r := range itemOps(b.doc.Webhooks[name], InWebhooks, name, keys) {
			b.refs = append(b.refs, r)
			b.refs = append(b.refs, callbackOps(r)...)
		}
	}
	b.checkInsideOps()
	byName := map[string]*Operation{}
	b.annotated = map[*opRef]bool{}
	b.optionalKeys = map[Pos][]optionalKey{}
	b.optOuts, b.optOutReasons = nil, map[*opRef]string{}
	for _, r := range b.refs {
		op := b.operation(r)
		if op == nil {
			continue
		}
		b.annotated[r] = true
		if prev, dup := byName[op.GoName]; dup {
			b.d.add(op.Pos, "operation %s: its Go name %s is already taken by %s (set a distinct operationId)", describeOp(op), op.GoName, describeOp(prev))
			continue
		}
		byName[op.GoName] = op
		b.ops = append(b.ops, op)
	}
	b.checkSharedIDs()
	b.checkRoutes()
	b.reportOptionalKeys()
}

// checkPathItem reports annotations put on a path item instead of its
// operations, where they would silently do nothing.
func (b *builder) checkPathItem(item *openapi3.PathItem, keys []string) {
	if item == nil {
		return
	}
	for _, ext := range []string{extOp, extDefaults} {
		if _, ok := item.Extensions[ext]; ok {
			b.d.add(b.at(append(slices.Clip(keys), ext)...), "%s belongs on an operation (post, put...), not on its path item", ext)
		}
	}
	b.checkExtNames(item.Extensions, keys, "a path item", extEffect(false))
	b.reportStray(paramServerPlaces(item.Parameters, item.Servers), keys, "the path item "+keys[len(keys)-1])
}

// checkInsideOps reports the idemgen extensions written inside an
// operation, or on a callback's path item, where they are not read.
func (b *builder) checkInsideOps() {
	items := map[*openapi3.PathItem]bool{}
	for _, r := range b.refs {
		if r.kind == InCallbacks && !items[r.item] {
			items[r.item] = true
			b.checkPathItem(r.item, r.keys[:len(r.keys)-1])
		}
		b.reportStray(strayPlaces(r.op), r.keys, describeRef(r))
	}
}

// checkRoutes reports path templates the runtime could not match, and two
// annotated operations that claim the same method and route shape under
// the same base path (the middleware would refuse to start).
func (b *builder) checkRoutes() {
	claimed := map[string]*Operation{}
	for _, o := range b.ops {
		if !o.Routed() || strings.ContainsAny(o.Path, "?#") {
			continue // a query string is reported with the operation
		}
		shape, err := routeShape(o.Path)
		if err != nil {
			b.d.add(o.Pos, "operation %s: %v", describeOp(o), err)
			continue
		}
		bases := o.BasePaths
		if len(bases) == 0 {
			bases = []string{""}
		}
		for _, base := range bases {
			if _, err := routeShape(base + o.Path); err != nil {
				b.d.add(o.Pos, "operation %s under base path %s: %v", describeOp(o), base, err)
				continue
			}
			bshape := base
			if strings.Contains(base, "{") {
				if bs, err := routeShape(base); err == nil {
					bshape = bs
				}
			}
			id := o.Method + " " + bshape + shape
			if prev, dup := claimed[id]; dup {
				b.d.add(o.Pos, "operation %s matches the same requests as %s (%s %s)", describeOp(o), describeOp(prev), o.Method, base+o.Path)
				continue
			}
			claimed[id] = o
		}
	}
}

// itemOps lists the operations of a path item found under keys.
func itemOps(item *openapi3.PathItem, kind OpKind, path string, keys []string) []*opRef {
	if item == nil {
		return nil
	}
	ops := item.Operations()
	var out []*opRef
	for _, m := range slices.Sorted(maps.Keys(ops)) {
		if ops[m] == nil {
			continue
		}
		out = append(out, &opRef{kind: kind, method: strings.ToUpper(m), path: path, op: ops[m], item: item,
			keys: append(slices.Clip(keys), strings.ToLower(m))})
	}
	return out
}

func callbackOps(parent *opRef) []*opRef {
	var out []*opRef
	cbs := parent.op.Callbacks
	for _, name := range slices.Sorted(maps.Keys(cbs)) {
		ref := cbs[name]
		if ref == nil || ref.Value == nil {
			continue
		}
		m := ref.Value.Map()
		for _, expr := range slices.Sorted(maps.Keys(m)) {
			for _, r := range itemOps(m[expr], InCallbacks, expr, append(parent.field("callbacks"), name, expr)) {
				r.callback = name
				r.parent = parent
				out = append(out, r)
			}
		}
	}
	return out
}

// pathQuery returns the query string or fragment a path key under paths
// holds ("?beta=true"), or "".
func pathQuery(r *opRef) string {
	if r.kind != InPaths {
		return ""
	}
	if i := strings.IndexAny(r.path, "?#"); i >= 0 {
		return r.path[i:]
	}
	return ""
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// operation decodes and resolves one operation's annotation; nil when it
// has none, is x-idempotent: false, or has errors.
func (b *builder) operation(r *opRef) *Operation {
	errsBefore := len(b.d.list)
	src, found := b.annotationSource(r)
	if !found {
		return nil
	}
	if m, isMap := src.raw.(map[string]any); src.written && isMap && m[optOutField] != nil {
		b.optOut(r, m, src.at)
		return nil
	}
	a := decodeAnnotation(extOp, src.raw, src.at, &b.d)
	if a == nil {
		b.optOuts = append(b.optOuts, &OptOut{Kind: r.kind, Method: r.method, Path: r.path, OperationID: r.op.OperationID, Pos: src.base})
		return nil
	}
	if q := pathQuery(r); q != "" {
		b.d.add(b.at("paths", r.path), "%s %s%s: the path key holds a query string or fragment (%s), which no request's path does: the policy would never match and the route would run unprotected; write the path without it (%s), one path per route",
			r.method, r.path, opIDSuffix(r.op.OperationID), q, strings.TrimSuffix(r.path, q))
	}
	o := b.newOperation(r, src.base)
	if o == nil {
		return nil
	}
	m, anon := b.applyLayers(o, src, a)
	b.checkPolicy(r, o, m)
	if o.Scope == o.ID() {
		o.Scope = ""
	}
	b.resolvePrincipal(r, o, anon)
	b.resolveFromSpec(r, o)
	if len(b.d.list) == errsBefore {
		// What the middleware would refuse that the checks above let
		// through: the runtime's own validators decide.
		b.checkRuntime(r, o, m, src.at)
	}
	// An operation with errors is returned too, so that its name and
	// route are checked against the others in the same run (the model is
	// not emitted when there are errors).
	return o
}

// opSource is the annotation an operation is built from, and where it is.
type opSource struct {
	raw any
	// base is the operation's x-idempotent key (or the operation, for
	// -annotate-mutating); at locates the annotation's fields.
	base Pos
	at   locator
	// written: the annotation is in the spec (not -annotate-mutating's).
	written bool
}

// annotationSource checks the operation's extensions and finds the
// annotation to decode: its x-idempotent, or -annotate-mutating's for an
// unannotated mutating operation; false when there is none.
func (b *builder) annotationSource(r *opRef) (opSource, bool) {
	b.checkExtNames(r.op.Extensions, r.keys, "operation "+describeRef(r), extEffect(true))
	if _, ok := r.op.Extensions[extDefaults]; ok {
		b.d.add(b.at(r.field(extDefaults)...), "%s belongs at the document root; on an operation use %s", extDefaults, extOp)
	}
	if raw, ok := r.op.Extensions[extOp]; ok {
		return opSource{raw: raw, base: b.at(r.field(extOp)...), at: b.locator(r.field(extOp)), written: true}, true
	}
	if r.kind != InPaths || !mutating(r.method) {
		return opSource{}, false
	}
	return b.unannotatedSource(r)
}

// unannotatedSource gives an unannotated mutating operation
// -annotate-mutating's annotation, when that is set and can apply (Lint
// reports the operation: lintUnannotated).
func (b *builder) unannotatedSource(r *opRef) (opSource, bool) {
	if b.cfg.AnnotateMutating == nil {
		return opSource{}, false
	}
	if b.streamingSkipped(r) {
		return opSource{}, false
	}
	if q := pathQuery(r); q != "" {
		b.w.addAs(SeverityWarning, b.at("paths", r.path), "-annotate-mutating: %s%s left unannotated: its path key holds a query string or fragment (%s), which no request's path does, so its policy could never match",
			describeRef(r), opIDSuffix(r.op.OperationID), q)
		return opSource{}, false
	}
	var raw any = b.cfg.AnnotateMutating
	if len(b.cfg.AnnotateMutating) == 0 {
		raw = true
	}
	base := b.at(r.keys...)
	return opSource{raw: raw, base: base, at: func(...string) Pos { return base }}, true
}

// newOperation is the operation with the contract's defaults, named and
// placed; nil (with an error) when no Go name can be made of it.
func (b *builder) newOperation(r *opRef, base Pos) *Operation {
	o := &Operation{
		Policy: idemrt.Policy{
			Method:           r.method,
			Route:            "/",
			Key:              KeyHeader,
			KeyName:          DefaultKeyHeader,
			TTL:              DefaultTTL,
			Lease:            DefaultLease,
			Save:             SaveRule{Classes: DefaultSaveClasses},
			MaxResponseBytes: DefaultMaxResponseBytes,
			MaxRequestBytes:  DefaultMaxRequestBytes,
		},
		OperationID: r.op.OperationID,
		Kind:        r.kind,
		Path:        r.path,
		Summary:     r.op.Summary,
		Pos:         base,
	}
	if r.kind == InPaths {
		o.Route = r.path
	}
	o.GoName = b.goName(r)
	if o.GoName == "" {
		b.d.add(base, "operation %s %s: cannot make a Go name of it (set an operationId with letters)", r.method, r.path)
		return nil
	}
	o.Policy.OperationID = o.OperationID
	if o.Policy.OperationID == "" {
		o.Policy.OperationID = o.GoName
	}
	if r.kind == InCallbacks {
		o.Callback = r.callback
		o.ParentOp = r.parent.op.OperationID
		o.ParentMethod, o.ParentPath = r.parent.method, r.parent.path
	}
	return o
}

// anonSource is where a written principal: anonymous came from, for the
// warning on an operation that authenticates its callers; from is empty
// when the principal is not a written anonymous.
type anonSource struct {
	at   Pos
	from string
}

// applyLayers sets the operation's fields from the document's defaults,
// then from its own annotation.
func (b *builder) applyLayers(o *Operation, src opSource, a *annotation) (*merged, anonSource) {
	// Defaults first, then the operation's own fields.
	m := &merged{base: src.base, layers: []*annotation{b.defaults, a}, written: src.written}
	var anon anonSource
	for _, layer := range m.layers {
		if layer == nil {
			continue
		}
		applyLayer(o, m, layer)
		if layer.principal == nil {
			continue
		}
		// Where a written anonymous came from, for the warning in
		// resolvePrincipal (-annotate-mutating's is the user's flag, not
		// the spec's).
		switch {
		case o.Principal != PrincipalAnonymous || (layer == a && !src.written):
			anon = anonSource{}
		case layer == a:
			anon = anonSource{at: src.at("principal"), from: extOp}
		default:
			anon = anonSource{at: src.base, from: extDefaults}
		}
	}
	return m, anon
}

// applyLayer sets the fields one annotation layer writes, over the
// layers before it.
func applyLayer(o *Operation, m *merged, layer *annotation) {
	if k := layer.key; k != nil {
		m.key = k
		o.Key, o.KeyName, o.KeyFields = k.source, k.name, k.fields
	}
	if layer.required != nil {
		o.Optional = !*layer.required
	}
	if layer.scope != nil {
		o.Scope = *layer.scope
	}
	if layer.principal != nil {
		o.Principal = *layer.principal
	}
	if f := layer.fingerprint; f != nil {
		m.fingerprint = f
		o.FingerprintInclude, o.FingerprintExclude = f.include, f.exclude
	}
	if layer.ttl != nil {
		o.TTL = layer.ttl.d
	}
	if layer.lease != nil {
		o.Lease = layer.lease.d
	}
	if layer.wait != nil {
		o.Wait = layer.wait.d
	}
	if layer.replaySet {
		o.ReplayHeaders = layer.replayHeaders
	}
	if layer.save != nil {
		o.Save = *layer.save
	}
	if layer.maxResponse != nil {
		o.MaxResponseBytes = *layer.maxResponse
	}
	if layer.maxRequest != nil {
		o.MaxRequestBytes = *layer.maxRequest
	}
	if layer.transactional != nil {
		o.Transactional = *layer.transactional
	}
}

// resolvePrincipal defaults an unset principal from the operation's
// security, and warns of a written anonymous on one that authenticates.
func (b *builder) resolvePrincipal(r *opRef, o *Operation, anon anonSource) {
	if o.Principal == 0 {
		o.Principal = PrincipalAnonymous
		if b.secured(r) {
			o.Principal = PrincipalAuth
		}
	} else if anon.from != "" && b.secured(r) {
		b.w.addAs(SeverityWarning, anon.at, "%s: principal anonymous (from %s) on %s, which authenticates its callers: they share one key space, so a caller who sends another caller's key is answered with that caller's saved response; leave principal out (an authenticated operation defaults to auth) unless that is what you want",
			extOp, anon.from, describeRef(r))
	}
}

// resolveFromSpec fills what the rest of the spec decides: the auth
// challenges, the replayed headers, the base paths.
func (b *builder) resolveFromSpec(r *opRef, o *Operation) {
	if o.Principal == PrincipalAuth {
		o.Challenges = b.challenges(r)
	}
	o.ReplayHeaders = b.replayHeaders(r.op, o.ReplayHeaders)
	if r.kind == InPaths {
		o.BasePaths = b.basePaths(r)
	}
}

// optOutField is the field of an opt-out with its reason:
// x-idempotent: {opt-out: "a repeat of this DELETE answers 204"}.
const optOutField = "opt-out"

// optOut decodes an opt-out with a reason: the field alone, a non-empty
// string. It leaves the operation unprotected, as x-idempotent: false
// does, and silences Lint's findings about it.
func (b *builder) optOut(r *opRef, m map[string]any, at locator) {
	bad := false
	for _, name := range sortedKeys(m) {
		if name != optOutField {
			b.d.add(at(name), "%s.%s: an opt-out takes no other field (it leaves the operation unprotected); remove %s, or the opt-out", extOp, name, name)
			bad = true
		}
	}
	reason, isString := m[optOutField].(string)
	if !isString || strings.TrimSpace(reason) == "" {
		b.d.add(at(optOutField), "%s.%s: want the reason the operation needs no protection, a non-empty string, got %s", extOp, optOutField, describe(m[optOutField]))
		bad = true
	}
	if bad {
		return
	}
	b.optOutReasons[r] = reason
	b.optOuts = append(b.optOuts, &OptOut{Kind: r.kind, Method: r.method, Path: r.path, OperationID: r.op.OperationID, Reason: reason, Pos: at(optOutField)})
}

func (b *builder) goName(r *opRef) string {
	own := func(x *opRef) string {
		if x.op.OperationID != "" {
			return goName(x.op.OperationID)
		}
		switch x.kind {
		case InWebhooks:
			return goName(strings.ToLower(x.method) + " " + x.path + " webhook")
		case InCallbacks:
			return ""
		}
		return derivedName(x.method, x.path)
	}
	if r.kind != InCallbacks {
		return own(r)
	}
	if r.op.OperationID != "" {
		return goName(r.op.OperationID)
	}
	parent := own(r.parent)
	if parent == "" {
		return ""
	}
	// createSubscription's callback onData, POST: CreateSubscriptionOnDataPost
	return goName(parent + " " + r.callback + " " + strings.ToLower(r.method))
}

// secured reports whether the operation's effective security asks for
// authentication, which makes the default principal auth. The effective
// security is the operation's own, else (for operations under paths only)
// the document's: the document's security describes how clients call the
// API, while webhooks and callbacks are called by the API provider. It is
// unauthenticated only when every alternative is the empty requirement
// ({}) or there is none; an optional {} next to a real scheme still
// authenticates the callers that present one, and pooling them with
// everyone would let one caller replay another's response.
func (b *builder) secured(r *opRef) bool {
	for _, req := range b.security(r) {
		if len(req) > 0 {
			return true
		}
	}
	return false
}

// security is r's effective security requirements (see secured).
func (b *builder) security(r *opRef) openapi3.SecurityRequirements {
	var reqs openapi3.SecurityRequirements
	if r.kind == InPaths {
		reqs = b.doc.Security
	}
	if r.op.Security != nil {
		reqs = *r.op.Security
	}
	return reqs
}

// challenges returns the WWW-Authenticate challenges of the 401 the
// wrapper answers when r's caller cannot be identified: one per scheme of
// r's effective security, in the order of its requirements (scheme names
// sorted within one), without repeats. http bearer, oauth2 and
// openIdConnect give Bearer (RFC 6750); http basic gives Basic with the
// API's title as its realm (RFC 7617 requires one). An apiKey has no HTTP
// authentication scheme, and other http schemes need parameters only the
// server knows (Digest's nonce), so they give none.
func (b *builder) challenges(r *opRef) []string {
	var out []string
	add := func(c string) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if b.doc.Components == nil {
		return nil // no schemes to look up (kin-openapi's validation reports the dangling names)
	}
	for _, req := range b.security(r) {
		for _, name := range slices.Sorted(maps.Keys(req)) {
			ref := b.doc.Components.SecuritySchemes[name]
			if ref == nil || ref.Value == nil {
				continue
			}
			switch s := ref.Value; {
			case s.Type == "oauth2" || s.Type == "openIdConnect":
				add("Bearer")
			case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
				add("Bearer")
			case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
				add(`Basic realm="` + realm(b.doc.Info) + `"`)
			}
		}
	}
	return out
}

// realm is the API's title as the contents of a quoted-string: printable
// ASCII, with quote and backslash escaped; "API" when nothing is left.
func realm(info *openapi3.Info) string {
	var sb strings.Builder
	if info != nil {
		for _, c := range info.Title {
			switch {
			case c == '"' || c == '\\':
				sb.WriteByte('\\')
				sb.WriteRune(c)
			case c >= ' ' && c < 0x7f:
				sb.WriteRune(c)
			}
		}
	}
	if strings.TrimSpace(sb.String()) == "" {
		return "API"
	}
	return sb.String()
}

// replayHeaders is the annotation's list plus the response headers the
// spec declares for the operation, without those replayed anyway or never
// replayed; canonical, sorted, unique.
func (b *builder) replayHeaders(op *openapi3.Operation, extra []string) []string {
	set := map[string]bool{}
	for _, h := range extra {
		set[h] = true
	}
	if op.Responses != nil {
		for _, resp := range op.Responses.Map() {
			if resp == nil || resp.Value == nil {
				continue
			}
			for name := range resp.Value.Headers {
				if !policysyntax.IsToken(name) {
					continue
				}
				set[textproto.CanonicalMIMEHeaderKey(name)] = true
			}
		}
	}
	var out []string
	for h := range set {
		if neverReplayed[h] || alwaysReplayed[h] {
			continue
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// basePaths returns the path parts of the servers that serve r (the
// operation's own, else its path item's, else the document's), one per
// value of each variable's enum (else its default), percent-decoded; nil
// when every one is the root.
func (b *builder) basePaths(r *opRef) []string {
	if b.cfg.BasePaths != nil {
		return overrideBasePaths(b.cfg.BasePaths)
	}
	servers := b.doc.Servers
	if len(r.item.Servers) > 0 {
		servers = r.item.Servers
	}
	if r.op.Servers != nil && len(*r.op.Servers) > 0 {
		servers = *r.op.Servers
	}
	// A server variable must not take the name of a path parameter: the
	// runtime parses base path + route as one template.
	reserved := map[string]bool{}
	for _, m := range pathParam.FindAllStringSubmatch(r.path, -1) {
		reserved[m[1]] = true
	}
	set := map[string]bool{}
	for _, s := range servers {
		if s == nil {
			continue
		}
		for _, p := range serverBasePaths(s, reserved) {
			set[p] = true
		}
	}
	if len(set) == 0 || (len(set) == 1 && set[""]) {
		return nil
	}
	// /{a} and /{b} (two servers) match the same requests: keep one.
	var out []string
	shapes := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(set)) {
		shape := p
		if sh, err := routeShape(p); err == nil && p != "" {
			shape = sh
		}
		if !shapes[shape] {
			shapes[shape] = true
			out = append(out, p)
		}
	}
	return out
}

// overrideBasePaths normalises Config.BasePaths as basePaths returns the
// servers': no trailing slash, sorted, distinct; nil when it is the root.
func overrideBasePaths(bases []string) []string {
	set := map[string]bool{}
	for _, p := range bases {
		set[strings.TrimSuffix(p, "/")] = true
	}
	if len(set) == 0 || (len(set) == 1 && set[""]) {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// maxServerURLs bounds the expansion of server variables' enums; past it
// the remaining variables take their defaults.
const maxServerURLs = 256

var pathParam = regexp.MustCompile(`\{([^{}/]+)\}`)

// serverBasePaths expands a server URL's variables, each to every value
// of its enum plus its default. A variable without an enum that stands
// for one whole segment of the path (https://x/{tenant}/api) stays a
// parameter, {tenant}, matching any value; one elsewhere in the path, or
// named like a path parameter (reserved), takes its default. Returns the
// distinct base paths, sorted.
func serverBasePaths(s *openapi3.Server, reserved map[string]bool) []string {
	urls := []string{s.URL}
	for _, name := range slices.Sorted(maps.Keys(s.Variables)) {
		v := s.Variables[name]
		if v == nil {
			continue
		}
		ref := "{" + name + "}"
		if !strings.Contains(s.URL, ref) {
			continue
		}
		if len(v.Enum) == 0 && !reserved[name] && segmentVariable(s, name) {
			continue // left in place as {name}
		}
		vals := []string{v.Default}
		if len(urls)*(len(v.Enum)+1) <= maxServerURLs {
			vals = append(vals, v.Enum...)
		}
		seen := map[string]bool{}
		var next []string
		for _, u := range urls {
			for _, val := range vals {
				x := strings.ReplaceAll(u, ref, val)
				if !seen[x] {
					seen[x] = true
					next = append(next, x)
				}
			}
		}
		urls = next
	}
	set := map[string]bool{}
	for _, u := range urls {
		set[urlBasePath(u)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// segmentVariable reports whether the variable name of s can be a route
// parameter: its default is one non-empty segment, and it stands for
// exactly one whole segment of the URL's path (not the host, not part of a
// segment).
func segmentVariable(s *openapi3.Server, name string) bool {
	v := s.Variables[name]
	if v == nil || v.Default == "" || strings.ContainsAny(v.Default, "/?#") || name == "" || strings.ContainsAny(name, "{}/%") {
		return false
	}
	const mark = "\x00"
	raw := strings.ReplaceAll(s.URL, "{"+name+"}", mark)
	for other, ov := range s.Variables {
		if other != name && ov != nil {
			raw = strings.ReplaceAll(raw, "{"+other+"}", ov.Default)
		}
	}
	n := 0
	for _, seg := range strings.Split(urlBasePath(raw), "/") {
		switch {
		case seg == mark:
			n++
		case strings.Contains(seg, mark):
			return false
		}
	}
	return n == 1
}

// serverBasePath is the base path of a server URL with its variables'
// defaults substituted.
func serverBasePath(s *openapi3.Server) string {
	raw := s.URL
	for name, v := range s.Variables {
		if v != nil {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
	}
	return urlBasePath(raw)
}

// urlBasePath is the path of a server URL, percent-decoded (the runtime
// compares decoded request segments): "https://api.x.com/v1/" -> "/v1",
// "/v1" -> "/v1". The root is "".
func urlBasePath(raw string) string {
	p := raw
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if i := strings.Index(p, "://"); i >= 0 {
		p = p[i+3:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[j:]
		} else {
			p = ""
		}
	} else if strings.HasPrefix(p, "//") {
		p = p[2:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[j:]
		} else {
			p = ""
		}
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	p = strings.TrimRight(p, "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

func describeRef(r *opRef) string {
	switch r.kind {
	case InWebhooks:
		return fmt.Sprintf("webhook %s %s", r.path, r.method)
	case InCallbacks:
		return fmt.Sprintf("callback %s %s %s", r.callback, r.method, r.path)
	}
	return r.method + " " + r.path
}

func opIDSuffix(id string) string {
	if id == "" {
		return ""
	}
	return " (" + id + ")"
}

func describeOp(o *Operation) string {
	var s string
	switch o.Kind {
	case InWebhooks:
		s = fmt.Sprintf("webhook %s %s", o.Path, o.Method)
	case InCallbacks:
		s = fmt.Sprintf("callback %s %s %s", o.Callback, o.Method, o.Path)
	default:
		s = o.Method + " " + o.Path
	}
	if o.OperationID != "" {
		s += " (" + o.OperationID + ")"
	}
	return s
}

// routeShape checks a route as the middleware parses it and returns it
// with its parameter names erased ("/a/{id}.{ext}" -> "/a/{}.{}"): two
// routes of one shape match the same requests.
func routeShape(route string) (string, error) {
	t, err := policysyntax.ParseRoute(route)
	if err != nil {
		return "", err
	}
	return t.Shape, nil
}
