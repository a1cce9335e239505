package runtime

import (
	"encoding/hex"
	"errors"
	"net/http"
)

// What a client of an idempotent API needs from the policies: which
// requests they cover (matched by method and route under the base paths,
// as the middleware matches them) and, for operations whose key is derived
// from the request, the key the server will derive. For the retrying
// transport in client/idemclient.

// ClientMatcher finds the policy of an outgoing request.
type ClientMatcher struct {
	routes routeTable
}

// NewClientMatcher compiles the policies for a client. basePaths, when
// non-nil, replaces every policy's BasePaths (as Options.BasePaths does).
// Two policies on the same method and route are an error, as they are for
// NewMiddleware; server-side settings (principal function, transactional
// store) are not needed.
func NewClientMatcher(basePaths []string, policies ...*Policy) (*ClientMatcher, error) {
	if err := checkBasePaths("base paths", basePaths); err != nil {
		return nil, err
	}
	e := &engine{}
	routes, err := newRouteTable(policies, func(p *Policy) (*operation, error) {
		if p == nil {
			return nil, errors.New("idempotency: nil *Policy")
		}
		// The client sends the key; whose key space it lands in and how
		// the server commits are the server's business.
		c := *p
		c.Principal, c.Challenges, c.Transactional = PrincipalAnonymous, nil, false
		return e.compile(withBasePaths(&c, basePaths))
	})
	if err != nil {
		return nil, err
	}
	return &ClientMatcher{routes: routes}, nil
}

// ClientOperation is a request matched to its operation.
type ClientOperation struct {
	// Policy is the operation's policy, as given to NewClientMatcher.
	Policy *Policy
	// KeyName is the canonical header name (KeyFromHeader) or the query
	// parameter (KeyFromQuery) that carries the key.
	KeyName string
	op      *operation
	params  []string
	method  string
}

// Match returns the operation of a request by its method and escaped path
// (URL.EscapedPath), or nil.
func (m *ClientMatcher) Match(method, escapedPath string) *ClientOperation {
	mt, params := m.routes.match(method, escapedPath, nil)
	if mt == nil {
		return nil
	}
	return &ClientOperation{Policy: mt.policy, KeyName: mt.op.keyName, op: mt.op, params: params, method: method}
}

// SentKey returns the key a request carries in the operation's header or
// query parameter, read as the middleware reads it, and how many it
// carries (the middleware refuses more than one); n is 0 for operations
// whose key is derived from the request.
func (c *ClientOperation) SentKey(h http.Header, rawQuery string) (key string, n int) {
	switch c.op.key {
	case KeyFromHeader:
		if vs := h[c.op.keyName]; len(vs) > 0 {
			return vs[0], len(vs)
		}
	case KeyFromQuery:
		return queryValue(rawQuery, c.op.keyName)
	}
	return "", 0
}

// DerivedKeyOf returns the key the server derives from a request with the
// header h for a KeyFromFields operation (scope + ":" + the canonical
// values of the fields) or a KeyFromBody one (a hash of the request),
// exactly as the server does: its first Content-Type and every
// Content-Encoding value count, as the middleware reads them (a body with
// a Content-Encoding has no fields key; it counts as raw bytes in a body
// key). ok is false for operations keyed by a header or query parameter,
// and when the body lacks a key field (the server then answers 400, or
// runs unprotected when the key is optional).
func (c *ClientOperation) DerivedKeyOf(h http.Header, rawQuery string, body []byte) (key string, ok bool) {
	var ct string
	if vs := h["Content-Type"]; len(vs) > 0 {
		ct = vs[0]
	}
	return c.derivedKey(rawQuery, ct, h["Content-Encoding"], body)
}

func (c *ClientOperation) derivedKey(rawQuery, contentType string, encoding []string, body []byte) (key string, ok bool) {
	op := c.op
	switch op.key {
	case KeyFromFields:
		cz := getCanon()
		defer putCanon(cz)
		return fieldsKey(cz, op, contentType, encoding, body)
	case KeyFromBody:
		cz := getCanon()
		defer putCanon(cz)
		fp := cz.fingerprint(FingerprintVersion, &fpInput{method: c.method, route: op.route, params: c.params, rawQuery: rawQuery,
			contentType: contentType, encoding: encoding, include: op.include, inc: op.includeToks}, body, op.exclude)
		return bodyKey(fp), true
	}
	return "", false
}

// fieldsKey derives the key of a KeyFromFields operation from a JSON body;
// ok is false when the body is not JSON (or has a Content-Encoding: the
// handler reads what its decompression makes of the bytes), lacks a field,
// or has an object with two member names equal under encoding/json's case
// folding.
func fieldsKey(c *canonicalizer, op *operation, contentType string, encoding []string, body []byte) (string, bool) {
	if mediaKind(contentType) != bodyJSON || encoding != nil {
		return "", false
	}
	vals, ok := fieldsKeyValues(c, nil, body, op.keyFields)
	if !ok {
		return "", false
	}
	return derivedKey(op.scope, vals), true
}

// bodyKey is the key of a KeyFromBody operation: its fingerprint.
func bodyKey(fp [32]byte) string { return "sha256:" + hex.EncodeToString(fp[:]) }
