package generator

import (
	"maps"
	"mime"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// API-design findings: what an operation's documented responses say about
// how it behaves when a client retries it.

// streamingMedia are response media types whose body is a stream of
// events or records. The wrapper buffers a response whole to save it, so
// a stream would reach its client only when it ends, and a replay would
// be a recording of it.
var streamingMedia = map[string]bool{
	"text/event-stream":       true,
	"application/x-ndjson":    true,
	"application/ndjson":      true,
	"application/jsonl":       true,
	"application/x-jsonlines": true,
	"application/json-seq":    true,
	"application/stream+json": true,
}

// streams returns the first documented response of r whose body is a
// stream, and its media type; "", "" when none is.
func streams(r *opRef) (status, media string) {
	if r.op.Responses == nil {
		return "", ""
	}
	m := r.op.Responses.Map()
	for _, status := range slices.Sorted(maps.Keys(m)) {
		resp := m[status]
		if resp == nil || resp.Value == nil {
			continue
		}
		for _, mt := range slices.Sorted(maps.Keys(resp.Value.Content)) {
			if base, _, err := mime.ParseMediaType(mt); err == nil && streamingMedia[base] {
				return status, base
			}
		}
	}
	return "", ""
}

const streamingWhy = "the idempotency layer buffers a response whole to save and replay it, so the stream would reach the client only at its end, and a retry would get a recording"

// checkStreaming refuses an annotation written on an operation whose
// documented responses stream (Generate and Lint both report it).
// -annotate-mutating leaves such operations out instead
// (streamingSkipped), so the check only meets written annotations.
func (b *builder) checkStreaming(r *opRef, at Pos) {
	if status, media := streams(r); media != "" {
		b.d.add(at, "%s on %s: its %s response streams (%s); %s; remove the annotation (x-idempotent: false), or split the stream off into an operation of its own",
			extOp, describeRef(r), status, media, streamingWhy)
	}
}

// streamingSkipped reports whether -annotate-mutating must leave r out
// because its response streams, with a warning saying so.
func (b *builder) streamingSkipped(r *opRef) bool {
	status, media := streams(r)
	if media == "" {
		return false
	}
	b.w.addAs(SeverityWarning, b.at(r.keys...), "-annotate-mutating: %s%s left unannotated: its %s response streams (%s); %s",
		describeRef(r), opIDSuffix(r.op.OperationID), status, media, streamingWhy)
	return true
}

// lintDesign adds Lint's API-design findings about the operations under
// paths and webhooks (run found them): a DELETE whose documented 404 answers a repeat, and
// an annotated operation that documents 422 for errors of its own.
func (b *builder) lintDesign() {
	for _, r := range b.refs {
		if r.kind == InCallbacks {
			continue
		}
		on := b.annotated[r]
		// An opt-out with its reason has been thought about: silent.
		_, reasoned := b.optOutReasons[r]
		if r.kind == InPaths && r.method == "DELETE" && !on && !reasoned {
			b.lintDelete(r)
		}
		if on {
			b.lint422(r)
		}
	}
}

// responsePos is the place of a response's status in the spec.
func (b *builder) responsePos(r *opRef, status string) Pos {
	return b.at(append(slices.Clip(r.keys), "responses", status)...)
}

// description is a response's description, through its $ref.
func description(ref *openapi3.ResponseRef) string {
	if ref == nil || ref.Value == nil || ref.Value.Description == nil {
		return ""
	}
	return *ref.Value.Description
}

func mentions(text string, words ...string) bool {
	t := strings.ToLower(text)
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(t, w) })
}

// lintDelete: a DELETE that documents 404, unless its success response
// says it also answers a resource that is already gone (then 404 is for
// one that never existed, as in examples/payments). A client whose first
// DELETE succeeded but whose response was lost retries and gets 404: it
// cannot tell "deleted" from "never existed".
func (b *builder) lintDelete(r *opRef) {
	if r.op.Responses == nil {
		return
	}
	nf := r.op.Responses.Value("404")
	if nf == nil {
		return
	}
	explicit := mentions(description(nf), "already", "deleted", "gone", "no longer")
	if !explicit {
		for status, resp := range r.op.Responses.Map() {
			if strings.HasPrefix(status, "2") && mentions(description(resp), "already", "before", "again", "gone") {
				return
			}
		}
	}
	b.advice.addAs(SeverityFinding, b.responsePos(r, "404"), "DELETE %s%s documents 404: a client whose delete succeeded but whose response was lost retries and gets 404, and cannot tell \"deleted\" from \"never existed\"; answer 204 for a resource that is already gone (and say so in the 204's description), or annotate the operation with %s so that a retry replays the first answer (or, if the 404 is what you mean, say why: %s: {opt-out: reason})",
		r.path, opIDSuffix(r.op.OperationID), extOp, extOp)
}

// lint422: an annotated operation that documents 422 for its own errors
// (the response's description does not speak of the idempotency key).
func (b *builder) lint422(r *opRef) {
	if r.op.Responses == nil {
		return
	}
	resp := r.op.Responses.Value("422")
	if resp == nil || mentions(description(resp), "idempoten", "fingerprint", "key was", "key is reused", "same key") {
		return
	}
	b.advice.addAs(SeverityWarning, b.responsePos(r, "422"), "%s%s documents 422 for errors of its own, and %s answers 422 too when a key is reused with a different request: clients must check the problem type (%s) to tell the two apart, and must not retry that one with the same key; say so in the 422's description",
		describeRef(r), opIDSuffix(r.op.OperationID), extOp, idemrt.ProblemFingerprintMismatch)
}
