package runtime

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/internal/policysyntax"
)

// Validators the generator shares with the runtime, so that what idemgen
// accepts at generation time is exactly what NewMiddleware accepts at
// start-up: compile runs ValidatePolicy's validators, then applies the
// defaults; idemgen runs the same validators on the policy it would emit
// and reports each FieldError at the place in the spec its field comes
// from.

// FieldError is one problem with one field of a Policy.
type FieldError struct {
	// Section is the validator that found it: route, key, principal,
	// fingerprint, limits, save, replay or tx.
	Section string
	// Field is the Policy field at fault (Route, KeyName, FingerprintExclude,
	// TTL...); for a problem between two fields, the first of them.
	Field string
	// Index is the element of a list field at fault, or -1.
	Index int
	// Msg says what is wrong, without the operation's name.
	Msg string
}

func (e *FieldError) Error() string { return e.Msg }

// PolicyEnv is what a policy's validity depends on besides the policy
// itself: the middleware's Options.
type PolicyEnv struct {
	// Principal: Options.Principal is set (PrincipalAuth needs it).
	Principal bool
	// TxStore: the store implements TxStore (Transactional needs it).
	TxStore bool
	// Store is the store, named in the message when it is not a TxStore.
	Store Store
}

// ValidatePolicy returns every problem of p that NewMiddleware (and Wrap)
// refuse in env, in the order of the sections: route, key, principal,
// fingerprint, limits, save, replay, tx. Nil means the policy starts.
func ValidatePolicy(p *Policy, env PolicyEnv) []*FieldError {
	if p == nil {
		return []*FieldError{{Section: "route", Field: "", Index: -1, Msg: "nil *Policy"}}
	}
	var errs []*FieldError
	for _, v := range []func(*Policy, PolicyEnv) []*FieldError{
		validateRoute, validateKey, validatePrincipal, validateFingerprint,
		validateLimits, validateSave, validateReplay, validateTx,
	} {
		errs = append(errs, v(p, env)...)
	}
	return errs
}

// fieldErrs collects the errors of one section.
type fieldErrs struct {
	section string
	list    []*FieldError
}

func (f *fieldErrs) add(field string, index int, format string, args ...any) {
	f.list = append(f.list, &FieldError{Section: f.section, Field: field, Index: index, Msg: fmt.Sprintf(format, args...)})
}

// validateRoute checks Method, Route and BasePaths.
func validateRoute(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "route"}
	if p.Method == "" || !policysyntax.IsToken(p.Method) || p.Method != strings.ToUpper(p.Method) {
		f.add("Method", -1, "method %q is not an upper-case HTTP method", p.Method)
	}
	if _, err := checkRoute(p.Route); err != nil {
		f.add("Route", -1, "%v", err)
		return f.list
	}
	for i, b := range basePaths(p.BasePaths) {
		if b != "" && !strings.HasPrefix(b, "/") {
			f.add("BasePaths", i, "base path %q does not start with /", b)
			continue
		}
		if _, err := checkRoute(b + p.Route); err != nil {
			f.add("BasePaths", i, "%v", err)
		}
	}
	return f.list
}

// basePaths yields a policy's base paths without their trailing slash,
// each once, with its index in the list: "/v1" and "/v1/" are one.
func basePaths(bases []string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		seen := map[string]bool{}
		for i, b := range bases {
			b = strings.TrimSuffix(b, "/")
			if seen[b] {
				continue
			}
			seen[b] = true
			if !yield(i, b) {
				return
			}
		}
	}
}

// validateKey checks Key, KeyName and KeyFields.
func validateKey(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "key"}
	switch p.Key {
	case 0, KeyFromHeader:
		if p.KeyName != "" && !policysyntax.IsToken(p.KeyName) {
			f.add("KeyName", -1, "key header %q is not a valid header name", p.KeyName)
		}
	case KeyFromQuery:
		if p.KeyName == "" {
			f.add("KeyName", -1, "key from query needs KeyName")
		}
	case KeyFromFields:
		if len(p.KeyFields) == 0 {
			f.add("KeyFields", -1, "key from fields needs KeyFields")
		}
		for i, k := range p.KeyFields {
			if slices.Contains(strings.Split(k, "."), "") {
				f.add("KeyFields", i, "key field %q is not a dotted path such as order.id", k)
			}
		}
	case KeyFromBody:
	default:
		f.add("Key", -1, "unknown key source %d", p.Key)
	}
	if p.Key != KeyFromHeader && p.Key != KeyFromQuery && p.Key != 0 && p.KeyName != "" {
		f.add("KeyName", -1, "KeyName %q set for a key that is not read from a header or query parameter", p.KeyName)
	}
	return f.list
}

// validatePrincipal checks Principal and Challenges.
func validatePrincipal(p *Policy, env PolicyEnv) []*FieldError {
	f := fieldErrs{section: "principal"}
	switch p.Principal {
	case 0, PrincipalAuth:
		if !env.Principal {
			f.add("Principal", -1, "principal mode is auth (keys per caller) but Options.Principal is nil; supply a principal function, or set the operation's principal to anonymous for one shared key space")
		}
	case PrincipalAnonymous:
	default:
		f.add("Principal", -1, "unknown principal mode %d", p.Principal)
	}
	if len(p.Challenges) > 0 && p.Principal == PrincipalAnonymous {
		f.add("Challenges", -1, "Challenges set on an anonymous operation, which never answers 401")
	}
	for i, c := range p.Challenges {
		if !validChallenge(c) {
			f.add("Challenges", i, "challenge %q is not a WWW-Authenticate challenge (an auth-scheme token, then optional parameters, on one line)", c)
		}
	}
	return f.list
}

// validateFingerprint checks FingerprintInclude and FingerprintExclude.
func validateFingerprint(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "fingerprint"}
	if len(p.FingerprintInclude) > 0 && len(p.FingerprintExclude) > 0 {
		f.add("FingerprintInclude", -1, "fingerprint include and exclude are both set")
	}
	for i, ptr := range p.FingerprintInclude {
		if _, err := policysyntax.SplitPointer(ptr); err != nil {
			f.add("FingerprintInclude", i, "fingerprint include: %v", err)
		}
	}
	if len(p.FingerprintExclude) > maxExclude {
		f.add("FingerprintExclude", -1, "more than %d fingerprint exclude pointers", maxExclude)
	}
	for i, ptr := range p.FingerprintExclude {
		toks, err := policysyntax.SplitPointer(ptr)
		if err != nil {
			f.add("FingerprintExclude", i, "fingerprint exclude: %v", err)
			continue
		}
		if len(toks) == 0 {
			f.add("FingerprintExclude", i, "fingerprint exclude %q would exclude the whole body", ptr)
		}
	}
	return f.list
}

// validateLimits checks TTL, Lease, Wait and the size limits, with the
// defaults of the zero values applied.
func validateLimits(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "limits"}
	ttl, lease := cmpOr(p.TTL, DefaultTTL), cmpOr(p.Lease, DefaultLease)
	if ttl < 0 || lease < 0 || p.Wait < 0 {
		field := "TTL"
		switch {
		case ttl < 0:
		case lease < 0:
			field = "Lease"
		default:
			field = "Wait"
		}
		f.add(field, -1, "negative ttl, lease or wait (%v, %v, %v)", p.TTL, p.Lease, p.Wait)
	}
	if ttl < lease {
		f.add("TTL", -1, "ttl %v is shorter than lease %v", ttl, lease)
	}
	if p.MaxResponseBytes < 0 || p.MaxRequestBytes < 0 {
		field := "MaxResponseBytes"
		if p.MaxResponseBytes >= 0 {
			field = "MaxRequestBytes"
		}
		f.add(field, -1, "negative max-response-bytes or max-request-bytes")
	}
	return f.list
}

// validateSave checks Save.
func validateSave(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "save"}
	if p.Save.Classes&^(Class1xx|Class2xx|Class3xx|Class4xx|Class5xx) != 0 {
		f.add("Save", -1, "save rule has unknown status classes %b", p.Save.Classes)
	}
	for i, c := range p.Save.Codes {
		if c < 100 || c > 599 {
			f.add("Save", i, "save rule lists status %d, not a status code", c)
		}
	}
	return f.list
}

// validateReplay checks ReplayHeaders.
func validateReplay(p *Policy, _ PolicyEnv) []*FieldError {
	f := fieldErrs{section: "replay"}
	for i, h := range p.ReplayHeaders {
		if !policysyntax.IsToken(h) {
			f.add("ReplayHeaders", i, "replay header %q is not a valid header name", h)
		}
	}
	return f.list
}

// validateTx checks Transactional against the store.
func validateTx(p *Policy, env PolicyEnv) []*FieldError {
	f := fieldErrs{section: "tx"}
	if p.Transactional && !env.TxStore {
		f.add("Transactional", -1, "transactional mode needs a store that implements TxStore; %T does not", env.Store)
	}
	return f.list
}

// cmpOr is v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// joinFieldErrs makes one error of a policy's problems, each prefixed as
// NewMiddleware words them.
func joinFieldErrs(name string, list []*FieldError) error {
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = fmt.Errorf("idempotency: operation %s: %w", name, e)
	}
	return errors.Join(errs...)
}

// validChallenge reports whether c can be sent as a WWW-Authenticate value:
// it starts with an auth-scheme (a token) and holds no control character,
// so it cannot break the header (RFC 9110 §11.6.1).
func validChallenge(c string) bool {
	scheme, _, _ := strings.Cut(c, " ")
	if !policysyntax.IsToken(scheme) {
		return false
	}
	for i := 0; i < len(c); i++ {
		if c[i] < ' ' && c[i] != '\t' || c[i] == 0x7f {
			return false
		}
	}
	return true
}
