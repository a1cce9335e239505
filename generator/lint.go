package generator

import (
	"context"
	"fmt"
	"net/textproto"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Lint reports the POST, PUT, PATCH and DELETE operations under `paths`
// that carry no x-idempotent at all (`x-idempotent: false` marks an
// operation as deliberately unprotected and silences it), with the key to
// use when the operation already declares one; the key parameters an
// annotation names that the operation does not declare; and every problem
// and warning Generate would report. Only cfg.Spec, cfg.SpecData and
// cfg.AllowRemoteRefs are used. The error is for documents that cannot be
// read or loaded; the findings, sorted, are the Diagnostics.
func Lint(ctx context.Context, cfg Config) (Diagnostics, error) {
	data, err := cfg.specData()
	if err != nil {
		return nil, err
	}
	cfg.AnnotateMutating = nil
	if cfg.Package == "" {
		cfg.Package = "lint"
	}
	b, err := load(ctx, cfg, data)
	if err != nil {
		return nil, err
	}
	b.run()
	b.lintDesign()
	b.lintUnannotated()
	all := slices.Concat(b.d.list, b.w.list, b.advice.list)
	return all.sorted(), nil
}

// lintUnannotated adds Lint's finding about each POST, PUT, PATCH and
// DELETE operation under paths that carries no x-idempotent at all, with
// the key to use when the operation already declares one (suggestKey).
func (b *builder) lintUnannotated() {
	for _, r := range b.refs {
		if _, annotated := r.op.Extensions[extOp]; annotated || r.kind != InPaths || !mutating(r.method) {
			continue
		}
		b.advice.addAs(SeverityFinding, b.at(r.keys...), "operation %s is not annotated: add x-idempotent, or x-idempotent: false if it is idempotent by nature%s",
			describeRef(r)+opIDSuffix(r.op.OperationID), suggestKey(r))
	}
}

// suggestKey returns, for an unannotated operation that already takes an
// idempotency key, the annotation that uses it, as the end of Lint's
// finding ("; suggest: x-idempotent: {key: {header: PayPal-Request-Id}}"),
// else "". It looks for a declared header or query parameter named like
// one (Idempotency-Key, X-Idempotency-Key, PayPal-Request-Id, X-Request-Id)
// and for a property of the JSON body (idempotency_key, idempotencyKey).
// A parameter or property the spec declares optional gives
// required: false, since clients may leave it out.
func suggestKey(r *opRef) string {
	type cand struct {
		rank     int // lower is better
		in, name string
		required bool
	}
	var best *cand
	consider := func(c cand) {
		if best == nil || c.rank < best.rank || c.rank == best.rank && c.name < best.name {
			best = &c
		}
	}
	for _, v := range r.params() {
		rank := keyNameRank(v.Name)
		if rank < 0 || (v.In != openapi3.ParameterInHeader && v.In != openapi3.ParameterInQuery) {
			continue
		}
		if v.In == openapi3.ParameterInQuery {
			rank += 2
		}
		consider(cand{rank, v.In, v.Name, v.Required})
	}
	if best == nil {
		for _, s := range jsonBodySchemas(r.op) {
			props, required := map[string]bool{}, map[string]bool{}
			topProperties(s, props, required, map[*openapi3.Schema]bool{})
			for name := range props {
				if keyNameRank(name) == 0 {
					consider(cand{4, "fields", name, required[name]})
				}
			}
		}
	}
	if best == nil {
		return ""
	}
	if best.in == openapi3.ParameterInHeader && textproto.CanonicalMIMEHeaderKey(best.name) == DefaultKeyHeader {
		// The default key: nothing to write but the optionality.
		if !best.required {
			return fmt.Sprintf("; suggest: %s: {required: false} (it declares the default key header, %s, as optional)", extOp, best.name)
		}
		return fmt.Sprintf("; suggest: %s: true (it declares the default key header, %s)", extOp, best.name)
	}
	key := fmt.Sprintf("{%s: %s}", best.in, best.name)
	if best.in == "fields" {
		key = fmt.Sprintf("{fields: [%s]}", best.name)
	}
	if !best.required {
		return fmt.Sprintf("; suggest: %s: {key: %s, required: false}", extOp, key)
	}
	return fmt.Sprintf("; suggest: %s: {key: %s}", extOp, key)
}

// keyNameRank says whether a parameter or property name is an idempotency
// key's: 0 for idempotency names (Idempotency-Key, X-Idempotency-Key,
// idempotency_key, idempotencyKey, Idempotency-Token), 1 for request-id
// names (PayPal-Request-Id, X-Request-Id, client_request_id), -1 else.
func keyNameRank(name string) int {
	n := strings.ToLower(strings.NewReplacer("-", "", "_", "", ".", "").Replace(name))
	switch {
	case strings.HasSuffix(n, "idempotencykey") || strings.HasSuffix(n, "idempotencytoken"):
		return 0
	case strings.HasSuffix(n, "requestid"):
		return 1
	}
	return -1
}

// topProperties adds the names of the properties of s, and of those it
// requires, to props and required, through allOf (a property of one
// alternative of a oneOf or anyOf is not in every body, so they are not
// followed).
func topProperties(s *openapi3.Schema, props, required map[string]bool, seen map[*openapi3.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	for name := range s.Properties {
		props[name] = true
	}
	for _, name := range s.Required {
		required[name] = true
	}
	for _, r := range s.AllOf {
		if r != nil {
			topProperties(r.Value, props, required, seen)
		}
	}
}
