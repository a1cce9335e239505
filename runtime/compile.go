package runtime

import (
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"time"
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

func (e *engine) compile(p *Policy) (*operation, error) {
	if p == nil {
		return nil, errors.New("idempotency: nil *Policy")
	}
	name := opName(p)
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("idempotency: operation %s: "+format, append([]any{name}, args...)...))
	}
	op := &operation{
		name:          name,
		method:        p.Method,
		route:         p.Route,
		scope:         p.Scope,
		optional:      p.Optional,
		principal:     p.Principal,
		ttl:           p.TTL,
		lease:         p.Lease,
		wait:          p.Wait,
		save:          p.Save,
		maxResp:       p.MaxResponseBytes,
		maxReq:        p.MaxRequestBytes,
		transactional: p.Transactional,
	}
	if p.Method == "" || !isToken(p.Method) || p.Method != strings.ToUpper(p.Method) {
		bad("method %q is not an upper-case HTTP method", p.Method)
	}
	if op.scope == "" {
		op.scope = name
	}
	// Routes.
	if rp, err := parseRoute(p.Route); err != nil {
		bad("%v", err)
	} else {
		op.paramNames = rp.paramNames
		if len(p.BasePaths) == 0 {
			op.patterns = []*routePattern{rp}
		}
		seen := map[string]bool{}
		for _, b := range p.BasePaths {
			b = strings.TrimSuffix(b, "/")
			if b != "" && !strings.HasPrefix(b, "/") {
				bad("base path %q does not start with /", b)
				continue
			}
			if seen[b] {
				continue
			}
			seen[b] = true
			full, err := parseRoute(b + p.Route)
			if err != nil {
				bad("%v", err)
				continue
			}
			op.patterns = append(op.patterns, full)
		}
	}
	// Key source.
	switch p.Key {
	case 0, KeyFromHeader:
		op.key = KeyFromHeader
		op.keyName = p.KeyName
		if op.keyName == "" {
			op.keyName = "Idempotency-Key"
		}
		if !isToken(op.keyName) {
			bad("key header %q is not a valid header name", op.keyName)
		}
		op.keyName = textproto.CanonicalMIMEHeaderKey(op.keyName)
	case KeyFromQuery:
		op.key = KeyFromQuery
		op.keyName = p.KeyName
		if op.keyName == "" {
			bad("key from query needs KeyName")
		}
	case KeyFromFields:
		op.key = KeyFromFields
		if len(p.KeyFields) == 0 {
			bad("key from fields needs KeyFields")
		}
		for _, f := range p.KeyFields {
			toks := strings.Split(f, ".")
			if slices.Contains(toks, "") {
				bad("key field %q is not a dotted path such as order.id", f)
				continue
			}
			op.keyFields = append(op.keyFields, toks)
		}
	case KeyFromBody:
		op.key = KeyFromBody
	default:
		bad("unknown key source %d", p.Key)
	}
	if p.Key != KeyFromHeader && p.Key != KeyFromQuery && p.Key != 0 && p.KeyName != "" {
		bad("KeyName %q set for a key that is not read from a header or query parameter", p.KeyName)
	}
	// Principal.
	switch p.Principal {
	case 0, PrincipalAuth:
		op.principal = PrincipalAuth
		if e.principal == nil {
			bad("principal mode is auth (keys per caller) but Options.Principal is nil; supply a principal function, or set the operation's principal to anonymous for one shared key space")
		}
	case PrincipalAnonymous:
	default:
		bad("unknown principal mode %d", p.Principal)
	}
	if len(p.Challenges) > 0 && p.Principal == PrincipalAnonymous {
		bad("Challenges set on an anonymous operation, which never answers 401")
	}
	for _, c := range p.Challenges {
		if !validChallenge(c) {
			bad("challenge %q is not a WWW-Authenticate challenge (an auth-scheme token, then optional parameters, on one line)", c)
		}
	}
	op.challenges = slices.Clone(p.Challenges)
	// Fingerprint selection.
	if len(p.FingerprintInclude) > 0 && len(p.FingerprintExclude) > 0 {
		bad("fingerprint include and exclude are both set")
	}
	for _, ptr := range p.FingerprintInclude {
		toks, err := parsePointer(ptr)
		if err != nil {
			bad("fingerprint include: %v", err)
			continue
		}
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
	if len(p.FingerprintExclude) > maxExclude {
		bad("more than %d fingerprint exclude pointers", maxExclude)
	}
	for _, ptr := range p.FingerprintExclude {
		toks, err := parsePointer(ptr)
		if err != nil {
			bad("fingerprint exclude: %v", err)
			continue
		}
		if len(toks) == 0 {
			bad("fingerprint exclude %q would exclude the whole body", ptr)
			continue
		}
		op.exclude = append(op.exclude, toks)
	}
	// Durations and sizes.
	if op.ttl == 0 {
		op.ttl = DefaultTTL
	}
	if op.lease == 0 {
		op.lease = DefaultLease
	}
	if op.ttl < 0 || op.lease < 0 || op.wait < 0 {
		bad("negative ttl, lease or wait (%v, %v, %v)", p.TTL, p.Lease, p.Wait)
	}
	if op.ttl < op.lease {
		bad("ttl %v is shorter than lease %v", op.ttl, op.lease)
	}
	if op.maxResp == 0 {
		op.maxResp = DefaultMaxResponseBytes
	}
	if op.maxReq == 0 {
		op.maxReq = DefaultMaxRequestBytes
	}
	if op.maxResp < 0 || op.maxReq < 0 {
		bad("negative max-response-bytes or max-request-bytes")
	}
	// Save rule.
	if op.save.Classes == 0 && len(op.save.Codes) == 0 {
		op.save = DefaultSave
	}
	if op.save.Classes&^(Class1xx|Class2xx|Class3xx|Class4xx|Class5xx) != 0 {
		bad("save rule has unknown status classes %b", op.save.Classes)
	}
	for _, c := range op.save.Codes {
		if c < 100 || c > 599 {
			bad("save rule lists status %d, not a status code", c)
		}
	}
	// Replay headers.
	op.replay = append(op.replay, defaultReplayHeaders...)
	for _, h := range p.ReplayHeaders {
		if !isToken(h) {
			bad("replay header %q is not a valid header name", h)
			continue
		}
		c := textproto.CanonicalMIMEHeaderKey(h)
		if neverReplayed[c] {
			// Dropped: never replayed whatever the spec says (CONTRACT §3).
			continue
		}
		if !slices.Contains(op.replay, c) {
			op.replay = append(op.replay, c)
		}
	}
	if p.Transactional && e.txStore == nil {
		bad("transactional mode needs a store that implements TxStore; %T does not", e.store)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return op, nil
}

// saves reports whether the save rule keeps a response with this status.
func (op *operation) saves(status int) bool { return op.save.Saves(status) }

// parsePointer splits an RFC 6901 JSON Pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return []string{}, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", p)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validChallenge reports whether c can be sent as a WWW-Authenticate value:
// it starts with an auth-scheme (a token) and holds no control character,
// so it cannot break the header (RFC 9110 §11.6.1).
func validChallenge(c string) bool {
	scheme, _, _ := strings.Cut(c, " ")
	if !isToken(scheme) {
		return false
	}
	for i := 0; i < len(c); i++ {
		if c[i] < ' ' && c[i] != '\t' || c[i] == 0x7f {
			return false
		}
	}
	return true
}
