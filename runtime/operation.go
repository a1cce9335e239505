package runtime

import (
	"errors"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/policysyntax"
)

// operation is a validated Policy with its defaults applied.
type operation struct {
	name       string
	method     string
	route      string
	scope      string
	key        KeySource
	keyName    string     // canonical header name or query parameter name
	keyFields  [][]string // dotted paths split on "."
	optional   bool
	principal  PrincipalMode
	challenges []string // WWW-Authenticate values of the 401

	include     []string   // sorted JSON pointers
	includeToks [][]string // their tokens
	exclude     [][]string // tokens of exclude pointers

	ttl, lease, wait time.Duration
	replay           []string // canonical header names stored and replayed
	save             SaveRule
	maxResp, maxReq  int64
	transactional    bool

	patterns   []*routePattern
	paramNames []string
}

// maxExclude bounds Policy.FingerprintExclude (the canonicaliser tracks
// them in a bit set).
const maxExclude = 64

// defaultReplayHeaders are replayed for every operation (CONTRACT §3).
var defaultReplayHeaders = []string{"Content-Type", "Location", "Content-Location", "Etag", "Last-Modified", "Link"}

// neverReplayed are dropped even when a policy lists them.
var neverReplayed = map[string]bool{
	"Set-Cookie": true, "Authorization": true, "Www-Authenticate": true, "Date": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Idempotent-Replayed": true,
}

// compile validates p (ValidatePolicy, in the engine's environment) and
// returns it with its defaults applied.
func (e *engine) compile(p *Policy) (*operation, error) {
	if p == nil {
		return nil, errors.New("idempotency: nil *Policy")
	}
	name := opName(p)
	env := PolicyEnv{Principal: e.principal != nil, TxStore: e.txStore != nil, Store: e.store}
	if errs := ValidatePolicy(p, env); len(errs) > 0 {
		return nil, joinFieldErrs(name, errs)
	}
	return withDefaults(p, name), nil
}

// withDefaults returns the operation of a valid policy: the contract's
// defaults in place of zero values, routes and pointers parsed, replay
// headers canonical.
func withDefaults(p *Policy, name string) *operation {
	op := &operation{
		name:          name,
		method:        p.Method,
		route:         p.Route,
		scope:         cmpOr(p.Scope, name),
		optional:      p.Optional,
		principal:     cmpOr(p.Principal, PrincipalAuth),
		challenges:    slices.Clone(p.Challenges),
		ttl:           cmpOr(p.TTL, DefaultTTL),
		lease:         cmpOr(p.Lease, DefaultLease),
		wait:          p.Wait,
		maxResp:       cmpOr(p.MaxResponseBytes, DefaultMaxResponseBytes),
		maxReq:        cmpOr(p.MaxRequestBytes, DefaultMaxRequestBytes),
		transactional: p.Transactional,
		key:           cmpOr(p.Key, KeyFromHeader),
		keyName:       canonicalKeyName(p),
		save:          p.Save,
	}
	// Routes.
	rp, _ := checkRoute(p.Route)
	op.paramNames = rp.paramNames
	if len(p.BasePaths) == 0 {
		op.patterns = []*routePattern{rp}
	}
	for _, b := range basePaths(p.BasePaths) {
		full, _ := checkRoute(b + p.Route)
		op.patterns = append(op.patterns, full)
	}
	// Key fields.
	if op.key == KeyFromFields {
		for _, f := range p.KeyFields {
			op.keyFields = append(op.keyFields, strings.Split(f, "."))
		}
	}
	// Fingerprint selection: include sorted.
	for _, ptr := range p.FingerprintInclude {
		toks, _ := policysyntax.SplitPointer(ptr)
		op.include = append(op.include, ptr)
		op.includeToks = append(op.includeToks, toks)
	}
	if len(op.include) > 0 {
		idx := make([]int, len(op.include))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return strings.Compare(op.include[a], op.include[b]) })
		inc, toks := make([]string, len(idx)), make([][]string, len(idx))
		for i, j := range idx {
			inc[i], toks[i] = op.include[j], op.includeToks[j]
		}
		op.include, op.includeToks = inc, toks
	}
	for _, ptr := range p.FingerprintExclude {
		toks, _ := policysyntax.SplitPointer(ptr)
		op.exclude = append(op.exclude, toks)
	}
	// Save rule.
	if op.save.Classes == 0 && len(op.save.Codes) == 0 {
		op.save = DefaultSave
	}
	// Replay headers.
	op.replay = append(op.replay, defaultReplayHeaders...)
	for _, h := range p.ReplayHeaders {
		c := textproto.CanonicalMIMEHeaderKey(h)
		if neverReplayed[c] {
			// Dropped: never replayed whatever the spec says (CONTRACT §3).
			continue
		}
		if !slices.Contains(op.replay, c) {
			op.replay = append(op.replay, c)
		}
	}
	return op
}

// canonicalKeyName is the key header's canonical name, or the query
// parameter's name.
func canonicalKeyName(p *Policy) string {
	switch p.Key {
	case 0, KeyFromHeader:
		if p.KeyName == "" {
			return "Idempotency-Key"
		}
		return textproto.CanonicalMIMEHeaderKey(p.KeyName)
	}
	return p.KeyName
}

// saves reports whether the save rule keeps a response with this status.
func (op *operation) saves(status int) bool { return op.save.Saves(status) }
