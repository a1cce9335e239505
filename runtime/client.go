package runtime

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// What a client of an idempotent API needs from the policies: which
// requests they cover (matched by method and route under the base paths,
// as the middleware matches them) and, for operations whose key is derived
// from the request, the key the server will derive. For the retrying
// transport in client/idemclient.

// ClientMatcher finds the policy of an outgoing request.
type ClientMatcher struct {
	byMethod map[string][]*matcher
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
	m := &ClientMatcher{byMethod: map[string][]*matcher{}}
	seen := map[string]string{}
	var errs []error
	for _, p := range policies {
		if p == nil {
			errs = append(errs, errors.New("idempotency: nil *Policy"))
			continue
		}
		// The client sends the key; whose key space it lands in and how
		// the server commits are the server's business.
		c := *p
		c.Principal, c.Challenges, c.Transactional = PrincipalAnonymous, nil, false
		op, err := e.compile(withBasePaths(&c, basePaths))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rp := range op.patterns {
			id := op.method + " " + rp.shape
			if prev, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("idempotency: operations %s and %s both claim %s %s", prev, op.name, op.method, rp.template))
				continue
			}
			seen[id] = op.name
			m.byMethod[op.method] = append(m.byMethod[op.method], &matcher{op: op, route: rp, policy: p})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, ms := range m.byMethod {
		slices.SortStableFunc(ms, func(a, b *matcher) int { return compareSpecificity(a.route, b.route) })
	}
	return m, nil
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
	for _, mt := range m.byMethod[method] {
		if params, ok := mt.route.match(escapedPath, nil); ok {
			return &ClientOperation{Policy: mt.policy, KeyName: mt.op.keyName, op: mt.op, params: params, method: method}
		}
	}
	return nil
}

// DerivedKey returns the key the server derives from the request for a
// KeyFromFields operation (scope + ":" + the canonical values of the
// fields) or a KeyFromBody one (a hash of the request), exactly as the
// server does; ok is false for operations keyed by a header or query
// parameter, and when the body lacks a key field (the server then answers
// 400, or runs unprotected when the key is optional).
func (c *ClientOperation) DerivedKey(rawQuery, contentType string, body []byte) (key string, ok bool) {
	op := c.op
	switch op.key {
	case KeyFromFields:
		cz := getCanon()
		defer putCanon(cz)
		return fieldsKey(cz, op, contentType, body)
	case KeyFromBody:
		cz := getCanon()
		defer putCanon(cz)
		fp := cz.fingerprint(FingerprintVersion, &fpInput{method: c.method, route: op.route, params: c.params, rawQuery: rawQuery,
			contentType: contentType, include: op.include, inc: op.includeToks}, body, op.exclude)
		return bodyKey(fp), true
	}
	return "", false
}

// fieldsKey derives the key of a KeyFromFields operation from a JSON body;
// ok is false when the body is not JSON or lacks a field.
func fieldsKey(c *canonicalizer, op *operation, contentType string, body []byte) (string, bool) {
	if mediaKind(contentType) != bodyJSON {
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
