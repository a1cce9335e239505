package generator

import (
	"bytes"
	"context"
	"fmt"
	"net/textproto"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Publishing: the spec with the contract made explicit, for the clients
// of an API. For every annotated operation of the model it adds the key
// parameter, the problem responses the wrapper can answer, the
// Idempotent-Replayed header on the responses that are saved, and a
// summary of the resolved policy in the operation's x-idempotent. The
// changes are computed once, as Overlay update actions, and either applied
// to the document or written as an OpenAPI Overlay 1.0.0 document.

// PublishOptions says what Publish writes.
type PublishOptions struct {
	// Overlay writes an OpenAPI Overlay 1.0.0 document holding the changes
	// instead of the changed spec.
	Overlay bool
	// JSON writes JSON instead of YAML.
	JSON bool
}

// Publication is a published spec (or its overlay).
type Publication struct {
	Data []byte
	// Notes say, with their place in the spec, what the publication left
	// as the spec has it or merged into it (a response the spec already
	// defines for a status the wrapper answers), and what it could not
	// reach. Sorted.
	Notes Diagnostics
	// Warnings are the model's warnings (as Generate's).
	Warnings Diagnostics
	// Model is the typed model the publication was made from.
	Model *Model
}

// Names added to components.
const (
	problemSchema        = "IdempotencyProblem"
	replayedHeader       = "Idempotent-Replayed"
	retryAfterHeader     = "Retry-After"
	problemMediaType     = "application/problem+json"
	schemaRefPrefix      = "#/components/schemas/"
	headerRefPrefix      = "#/components/headers/"
	keyParamDescription  = "The idempotency key: 1 to 255 visible ASCII characters (0x21-0x7E), or the same in the RFC 8941 quoted form (\"abc\", with \\\" and \\\\ escapes), which is unquoted. Send a fresh key per logical request and the same key on every retry of it; reusing a key with a different request gets 422."
	replayedHeaderDesc   = "true when this response is the saved response of an earlier request with the same idempotency key (the operation did not run again). Absent otherwise."
	retryAfterHeaderDesc = "Seconds to wait before retrying with the same idempotency key."
)

// Publish loads the spec, builds its model (as Generate does; the same
// errors come back as Diagnostics) and returns the published spec.
// Only cfg.Spec, cfg.SpecData, cfg.AllowRemoteRefs, cfg.AnnotateMutating
// (the operations it annotates are published as annotated) and
// cfg.BasePaths are used.
func Publish(ctx context.Context, cfg Config, opts PublishOptions) (*Publication, error) {
	data, err := cfg.specData()
	if err != nil {
		return nil, err
	}
	cfg.Package, cfg.SkipStore = "publish", true
	if err := cfg.check(); err != nil {
		return nil, err
	}
	model, warnings, err := build(ctx, cfg, data)
	if err != nil {
		return nil, err
	}
	fromJSON := bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))
	doc := &yaml.Node{}
	err = yaml.Unmarshal(data, doc)
	if err != nil && fromJSON {
		doc, err = jsonToNode(data)
	}
	if err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, Diagnostics{{Pos: Pos{File: cfg.Spec}, Msg: "cannot read the document as a YAML or JSON mapping"}}
	}
	p := &publisher{spec: cfg.Spec, root: doc.Content[0]}
	p.plan(model)
	var out []byte
	if opts.Overlay {
		out, err = p.overlay(opts.JSON)
	} else {
		out, err = p.apply(doc, opts.JSON, fromJSON)
	}
	if err != nil {
		return nil, err
	}
	return &Publication{Data: out, Notes: p.notes.list.sorted(), Warnings: warnings, Model: model}, nil
}

// action is one Overlay update action.
type action struct {
	target      string
	description string
	node        *yaml.Node // the target (to apply the update in place)
	update      *yaml.Node
}

type publisher struct {
	spec    string
	root    *yaml.Node
	actions []action
	notes   diags
	// quote is the style of the spec's status code keys ('201').
	quote yaml.Style
	// required are the key parameters published as required.
	required map[*yaml.Node]bool
}

func (p *publisher) pos(n *yaml.Node) Pos {
	if n == nil || n.Line == 0 {
		return Pos{File: p.spec}
	}
	return Pos{File: p.spec, Line: n.Line, Col: n.Column}
}

func (p *publisher) note(n *yaml.Node, format string, args ...any) {
	p.notes.addAs(SeverityNote, p.pos(n), format, args...)
}

// plan computes the actions: one per operation, then the components.
func (p *publisher) plan(m *Model) {
	ops := slices.Clone(m.Operations)
	slices.SortFunc(ops, func(a, b *Operation) int {
		return strings.Compare(opSortKey(a), opSortKey(b))
	})
	p.quote = yaml.SingleQuotedStyle
	used := false
	for _, o := range ops {
		if p.operation(o) {
			used = true
		}
	}
	if used {
		p.components()
	}
}

func opSortKey(o *Operation) string {
	return fmt.Sprintf("%d %s %s %s %s %s", o.Kind, o.ParentPath, o.ParentMethod, o.Callback, o.Path, o.Method)
}

// locate finds the operation's node and JSONPath, following local $refs
// of path items and callbacks.
func (p *publisher) locate(o *Operation) (*yaml.Node, string) {
	step := func(n *yaml.Node, path, key string) (*yaml.Node, string) {
		if n == nil {
			return nil, ""
		}
		c := get(n, key)
		if c == nil {
			return nil, ""
		}
		return deref(p.root, c, path+jsonPathStep(key))
	}
	walk := func(keys ...string) (*yaml.Node, string) {
		n, path := p.root, "$"
		for _, k := range keys {
			if n, path = step(n, path, k); n == nil {
				return nil, ""
			}
		}
		return n, path
	}
	method := strings.ToLower(o.Method)
	switch o.Kind {
	case InPaths:
		return walk("paths", o.Path, method)
	case InWebhooks:
		return walk("webhooks", o.Path, method)
	}
	for _, top := range []string{"paths", "webhooks"} {
		if n, path := walk(top, o.ParentPath, strings.ToLower(o.ParentMethod), "callbacks", o.Callback, o.Path, method); n != nil {
			return n, path
		}
	}
	return nil, ""
}

// operation plans the action of one annotated operation; false when it
// cannot be placed.
func (p *publisher) operation(o *Operation) bool {
	n, path := p.locate(o)
	if n == nil || n.Kind != yaml.MappingNode {
		p.notes.addAs(SeverityNote, o.Pos, "operation %s: not published: it is not in this file (a $ref to another document)", describeOp(o))
		return false
	}
	up := mapNode()
	if param := p.keyParameter(o, n, path); param != nil {
		set(up, "parameters", seqNode(param))
	}
	if rs := p.responses(o, get(n, "responses")); len(rs.Content) > 0 {
		set(up, "responses", rs)
	}
	if s := p.summary(o, get(n, extOp)); s != nil {
		set(up, extOp, s)
	}
	if len(up.Content) == 0 {
		return true
	}
	p.actions = append(p.actions, action{
		target:      path,
		description: "idempotency contract of " + describeOp(o),
		node:        n,
		update:      up,
	})
	return true
}

// keyParameter returns the key parameter to add, or nil when the key is
// not a parameter or the operation (or its path item) declares it.
func (p *publisher) keyParameter(o *Operation, op *yaml.Node, path string) *yaml.Node {
	var in string
	switch o.Key {
	case KeyHeader:
		in = "header"
	case KeyQuery:
		in = "query"
	default:
		return nil
	}
	item := p.parentItem(path)
	itemPath := path[:strings.LastIndexAny(path, ".[")]
	for i, list := range []*yaml.Node{get(op, "parameters"), get(item, "parameters")} {
		if list == nil {
			continue
		}
		listPath := []string{path, itemPath}[i] + ".parameters"
		for j, c := range list.Content {
			v, vpath := deref(p.root, c, fmt.Sprintf("%s[%d]", listPath, j))
			if v == nil {
				continue
			}
			name, at := get(v, "name"), get(v, "in")
			if name == nil || at == nil || at.Value != in {
				continue
			}
			if name.Value == o.KeyName || in == "header" && textproto.CanonicalMIMEHeaderKey(name.Value) == textproto.CanonicalMIMEHeaderKey(o.KeyName) {
				if req := get(v, "required"); !o.Optional && (req == nil || req.Value != "true") {
					p.requireKey(o, c, v, vpath, in)
					return nil
				}
				p.note(c, "%s: the key parameter %s (%s) is declared: left as is", describeOp(o), o.KeyName, in)
				return nil
			}
		}
	}
	return mapNode(
		"name", o.KeyName,
		"in", in,
		"required", !o.Optional,
		"description", keyParamDescription,
		"schema", mapNode("type", "string", "minLength", intNode(1), "maxLength", intNode(idemrt.MaxKeyLength)),
	)
}

// requireKey marks required the key parameter v (at vpath, written as c
// in the operation's list) that the spec declares optional while the
// operation's policy requires it: the published contract then says what
// the middleware does. A parameter shared through components is changed
// once.
func (p *publisher) requireKey(o *Operation, c, v *yaml.Node, vpath, in string) {
	if p.required == nil {
		p.required = map[*yaml.Node]bool{}
	}
	if p.required[v] {
		return
	}
	p.required[v] = true
	p.note(c, "%s: the key parameter %s (%s) is declared optional, and the middleware requires it: published as required", describeOp(o), o.KeyName, in)
	p.actions = append(p.actions, action{
		target:      vpath,
		description: fmt.Sprintf("the key parameter %s (%s) is required", o.KeyName, in),
		node:        v,
		update:      mapNode("required", true),
	})
}

// parentItem returns the path item holding the operation at path (the
// JSONPath up to its last step).
func (p *publisher) parentItem(path string) *yaml.Node {
	n, _ := p.walkPath(path)
	return n
}

// walkPath returns the parent of the node at a JSONPath this file wrote.
func (p *publisher) walkPath(path string) (*yaml.Node, bool) {
	steps := splitJSONPath(path)
	if len(steps) == 0 {
		return nil, false
	}
	n := p.root
	for _, s := range steps[:len(steps)-1] {
		if n = get(n, s); n == nil {
			return nil, false
		}
	}
	return n, true
}

// splitJSONPath splits a JSONPath of member steps written by jsonPathStep.
func splitJSONPath(path string) []string {
	rest, ok := strings.CutPrefix(path, "$")
	if !ok {
		return nil
	}
	var out []string
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
			i := strings.IndexAny(rest, ".[")
			if i < 0 {
				i = len(rest)
			}
			out = append(out, rest[:i])
			rest = rest[i:]
		case strings.HasPrefix(rest, "['"):
			var b strings.Builder
			i := 2
			for ; i < len(rest) && rest[i] != '\''; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			out = append(out, b.String())
			rest = rest[min(i+2, len(rest)):]
		default:
			return nil
		}
	}
	return out
}

// problem is a response the wrapper itself can answer.
type problem struct {
	status     int
	retryAfter bool
	types      []string
	why        string
}

// problems lists the responses the wrapper can answer for o.
func problems(o *Operation) []problem {
	keyWhy := "the idempotency key is missing or malformed, or the request body cannot be read"
	switch o.Key {
	case KeyFields:
		keyWhy = "the JSON body lacks a key field (the key is derived from " + strings.Join(o.KeyFields, ", ") + "), or cannot be read"
	case KeyBody:
		keyWhy = "the request body cannot be read"
	}
	if o.Optional && o.Key != KeyBody {
		keyWhy = "the idempotency key is malformed, or the request body cannot be read"
	}
	out := []problem{
		{400, false, []string{idemrt.ProblemKeyMissing, idemrt.ProblemKeyMalformed, idemrt.ProblemBodyUnreadable}, keyWhy},
	}
	if o.Principal == PrincipalAuth {
		out = append(out, problem{401, false, []string{idemrt.ProblemUnauthenticated}, "the caller is not authenticated, so its idempotency keys have no owner"})
	}
	return append(out,
		problem{409, true, []string{idemrt.ProblemInProgress, idemrt.ProblemResultUnavailable}, "a request with the same idempotency key is still in progress (retry after Retry-After with the same key), or its result was too large to save"},
		problem{413, false, []string{idemrt.ProblemRequestTooLarge}, fmt.Sprintf("the request body is larger than %s", sizeText(o.MaxRequestBytes))},
		problem{422, false, []string{idemrt.ProblemFingerprintMismatch}, "the idempotency key was used before with a different request"},
		problem{503, true, []string{idemrt.ProblemStoreUnavailable}, "the idempotency key store cannot be reached; the operation did not run (retry after Retry-After with the same key)"},
	)
}

func sizeText(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (pr problem) description() string {
	short := make([]string, len(pr.types))
	for i, t := range pr.types {
		short[i] = strings.TrimPrefix(t, idemrt.ProblemBase)
	}
	return fmt.Sprintf("Idempotency: %s. Problem types %s%s.", upperFirst(pr.why), idemrt.ProblemBase, strings.Join(short, ", "))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func problemContent() *yaml.Node {
	return mapNode(problemMediaType, mapNode("schema", refNode(schemaRefPrefix+problemSchema)))
}

// responses returns the responses update of o: the problem responses, and
// Idempotent-Replayed on the saved ones.
func (p *publisher) responses(o *Operation, have *yaml.Node) *yaml.Node {
	up := mapNode()
	if have != nil {
		for i := 0; i+1 < len(have.Content); i += 2 {
			if st := have.Content[i].Style; st != 0 {
				p.quote = st
				break
			}
		}
	}
	statusKey := func(code int) *yaml.Node {
		k := strNode(strconv.Itoa(code))
		k.Style = p.quote
		return k
	}
	for _, pr := range problems(o) {
		code := strconv.Itoa(pr.status)
		old := get(have, code)
		if old == nil {
			r := mapNode("description", pr.description())
			if pr.retryAfter {
				set(r, "headers", mapNode(retryAfterHeader, refNode(headerRefPrefix+retryAfterHeader)))
			}
			set(r, "content", problemContent())
			up.Content = append(up.Content, statusKey(pr.status), r)
			continue
		}
		if ref := get(old, "$ref"); ref != nil {
			p.note(keyNode(have, code), "%s %s: the spec's response is a $ref (%s): left as is; the wrapper answers it with %s%s",
				describeOp(o), code, ref.Value, problemMediaType, map[bool]string{true: " and Retry-After", false: ""}[pr.retryAfter])
			continue
		}
		merge := mapNode()
		var added []string
		// The spec's own answer and the wrapper's share the status: the
		// description says both (a business 409 and "in progress, retry").
		if desc := get(old, "description"); desc == nil || !strings.Contains(desc.Value, "Idempotency: ") {
			text := pr.description()
			if desc != nil && strings.TrimSpace(desc.Value) != "" {
				text = strings.TrimRight(desc.Value, "\n ") + "\n\n" + text
			}
			set(merge, "description", strNode(text))
			added = append(added, "the idempotency layer's description")
		}
		if get(get(old, "content"), problemMediaType) == nil {
			set(merge, "content", problemContent())
			added = append(added, problemMediaType)
		}
		if pr.retryAfter && get(get(old, "headers"), retryAfterHeader) == nil {
			set(merge, "headers", mapNode(retryAfterHeader, refNode(headerRefPrefix+retryAfterHeader)))
			added = append(added, retryAfterHeader)
		}
		if len(added) == 0 {
			p.note(keyNode(have, code), "%s %s: the spec's response already has %s: left as is", describeOp(o), code, problemMediaType)
			continue
		}
		p.note(keyNode(have, code), "%s %s: the spec defines this response: merged (added %s)", describeOp(o), code, strings.Join(added, " and "))
		up.Content = append(up.Content, statusKey(pr.status), merge)
	}
	p.replayed(o, have, up)
	return up
}

// replayed adds Idempotent-Replayed to the saved responses the spec
// defines inline.
func (p *publisher) replayed(o *Operation, have, up *yaml.Node) {
	if have == nil {
		return
	}
	for i := 0; i+1 < len(have.Content); i += 2 {
		k, v := have.Content[i], have.Content[i+1]
		if !saved(o.Save, k.Value) {
			continue
		}
		if ref := get(v, "$ref"); ref != nil {
			if !slices.ContainsFunc(problems(o), func(pr problem) bool { return strconv.Itoa(pr.status) == k.Value }) {
				p.note(k, "%s %s: the spec's response is a $ref (%s): left as is; replays of it carry %s", describeOp(o), k.Value, ref.Value, replayedHeader)
			}
			continue
		}
		if get(get(v, "headers"), replayedHeader) != nil || wrappers(v) {
			continue
		}
		h := mapNode("headers", mapNode(replayedHeader, refNode(headerRefPrefix+replayedHeader)))
		if prev := get(up, k.Value); prev != nil {
			mergeNode(prev, h)
			continue
		}
		key := strNode(k.Value)
		key.Style = k.Style
		up.Content = append(up.Content, key, h)
	}
}

// wrappers reports whether a response is one a publication added for the
// wrapper's own answers (its only content is the problem schema): those
// are never saved, so they carry no Idempotent-Replayed.
func wrappers(resp *yaml.Node) bool {
	c := get(resp, "content")
	if c == nil || len(c.Content) != 2 || c.Content[0].Value != problemMediaType {
		return false
	}
	ref := get(get(c.Content[1], "schema"), "$ref")
	return ref != nil && ref.Value == schemaRefPrefix+problemSchema
}

// saved reports whether a response key of the spec ("201", "2XX") is saved
// under rule (runtime's SaveRule semantics); "default" is not.
func saved(rule SaveRule, key string) bool {
	if len(key) != 3 {
		return false
	}
	if strings.EqualFold(key[1:], "XX") && key[0] >= '1' && key[0] <= '5' {
		return rule.Classes&(1<<(key[0]-'1')) != 0
	}
	code, err := strconv.Atoi(key)
	if err != nil {
		return false
	}
	return idemrt.SaveRule{Classes: idemrt.StatusClass(rule.Classes), Codes: rule.Codes}.Saves(code)
}

// summary returns the fields of the policy summary that the operation's
// own x-idempotent does not write (when it writes one, it holds the
// resolved value already); nil when there are none.
func (p *publisher) summary(o *Operation, have *yaml.Node) *yaml.Node {
	var key *yaml.Node
	switch o.Key {
	case KeyHeader:
		key = mapNode("header", o.KeyName)
	case KeyQuery:
		key = mapNode("query", o.KeyName)
	case KeyFields:
		fields := seqNode()
		for _, f := range o.KeyFields {
			fields.Content = append(fields.Content, strNode(f))
		}
		key = mapNode("fields", fields)
	case KeyBody:
		key = mapNode("body", true)
	}
	scope := o.Scope
	if scope == "" {
		scope = o.ID()
	}
	principal := "anonymous"
	if o.Principal == PrincipalAuth {
		principal = "auth"
	}
	all := mapNode("key", key, "required", !o.Optional, "scope", scope, "principal", principal, "ttl", durationText(o.TTL))
	if have == nil || have.Kind != yaml.MappingNode {
		return all // x-idempotent: true becomes the summary
	}
	out := mapNode()
	for i := 0; i+1 < len(all.Content); i += 2 {
		if get(have, all.Content[i].Value) == nil {
			out.Content = append(out.Content, all.Content[i], all.Content[i+1])
		}
	}
	if len(out.Content) == 0 {
		return nil
	}
	return out
}

// durationText writes d as the annotation does: 24h, 90m, 1h30m, 10s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// components plans the action that adds the problem schema and the two
// headers, each unless the spec has one of that name.
func (p *publisher) components() {
	want := []struct{ section, name string }{
		{"schemas", problemSchema}, {"headers", replayedHeader}, {"headers", retryAfterHeader},
	}
	defs := map[string]*yaml.Node{
		problemSchema: mapNode(
			"type", "object",
			"description", "An RFC 9457 problem details object, as the idempotency layer answers it (Content-Type "+problemMediaType+"). Clients tell the cases apart by type.",
			"required", seqNode(strNode("type"), strNode("title"), strNode("status")),
			"properties", mapNode(
				"type", mapNode("type", "string", "format", "uri", "description", "The problem type, one of "+idemrt.ProblemBase+"*; stable across releases."),
				"title", mapNode("type", "string"),
				"status", mapNode("type", "integer"),
				"detail", mapNode("type", "string"),
			),
		),
		replayedHeader:   mapNode("description", replayedHeaderDesc, "schema", mapNode("type", "string", "enum", seqNode(strNode("true")))),
		retryAfterHeader: mapNode("description", retryAfterHeaderDesc, "schema", mapNode("type", "integer", "minimum", intNode(0))),
	}
	comps := get(p.root, "components")
	up := mapNode()
	for _, w := range want {
		if old := get(get(comps, w.section), w.name); old != nil {
			p.note(keyNode(get(comps, w.section), w.name), "components.%s.%s exists: left as is (the published operations refer to it)", w.section, w.name)
			continue
		}
		sec := get(up, w.section)
		if sec == nil {
			sec = mapNode()
			set(up, w.section, sec)
		}
		set(sec, w.name, defs[w.name])
	}
	if len(up.Content) == 0 {
		return
	}
	if comps == nil {
		p.actions = append(p.actions, action{target: "$", description: "components of the idempotency contract", node: p.root, update: mapNode("components", up)})
		return
	}
	p.actions = append(p.actions, action{target: "$.components", description: "components of the idempotency contract", node: comps, update: up})
}

// apply applies the actions to the document and writes it.
func (p *publisher) apply(doc *yaml.Node, asJSON, fromJSON bool) ([]byte, error) {
	for _, a := range p.actions {
		mergeNode(a.node, a.update)
	}
	return encode(doc, asJSON, fromJSON)
}

// overlay writes the actions as an Overlay 1.0.0 document.
func (p *publisher) overlay(asJSON bool) ([]byte, error) {
	title, version := "the API", "1"
	if info := get(p.root, "info"); info != nil {
		if t := get(info, "title"); t != nil {
			title = t.Value
		}
		if v := get(info, "version"); v != nil {
			version = v.Value
		}
	}
	actions := seqNode()
	for _, a := range p.actions {
		actions.Content = append(actions.Content, mapNode("target", a.target, "description", a.description, "update", a.update))
	}
	var extends *yaml.Node
	if p.spec != "<stdin>" {
		extends = strNode(filepath.Base(p.spec))
	}
	ov := mapNode(
		"overlay", "1.0.0",
		"info", mapNode("title", "idempotency contract of "+title, "version", version),
		"extends", extends,
		"actions", actions,
	)
	return encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{ov}}, asJSON, false)
}

func encode(doc *yaml.Node, asJSON, fromJSON bool) ([]byte, error) {
	if asJSON {
		return writeJSON(doc)
	}
	if fromJSON {
		plain(doc)
	}
	return yaml.Dump(doc, yaml.WithIndent(2), yaml.WithCompactSeqIndent(false), yaml.WithLineWidth(-1))
}
