package runtime

import (
	"net/http"
	"slices"
	"time"
)

// KeySource says where an operation's idempotency key comes from
// (CONTRACT §1 `key`).
type KeySource int

const (
	// KeyFromHeader reads the key from the header Policy.KeyName.
	KeyFromHeader KeySource = iota + 1
	// KeyFromQuery reads the key from the query parameter Policy.KeyName.
	KeyFromQuery
	// KeyFromFields derives the key from the JSON body's business fields
	// Policy.KeyFields: scope + ":" + the canonical values.
	KeyFromFields
	// KeyFromBody derives the key from the whole request (content hash).
	KeyFromBody
)

// PrincipalMode says whose key space a key lives in.
type PrincipalMode int

const (
	// PrincipalAnonymous: one key space for every caller.
	PrincipalAnonymous PrincipalMode = iota + 1
	// PrincipalAuth: keys are per authenticated caller, as returned by the
	// configured principal function. Start-up fails without one.
	PrincipalAuth
)

// StatusClass is a bit set of response classes (1xx..5xx).
type StatusClass uint8

const (
	Class1xx StatusClass = 1 << iota
	Class2xx
	Class3xx
	Class4xx
	Class5xx
)

// SaveRule says which responses are saved and replayed; every other response
// releases the key. A status is saved when it is listed in Codes, or when its
// class is in Classes and it is not one of 404, 405, 408, 409, 425 and 429
// (those are saved only when listed in Codes): see Saves.
type SaveRule struct {
	Classes StatusClass
	Codes   []int
}

// DefaultSave is the default save rule: [2xx, 4xx] minus 404, 405, 408,
// 409, 425 and 429.
var DefaultSave = SaveRule{Classes: Class2xx | Class4xx}

// Saves reports whether r keeps a response with status (after its
// defaults are applied: a zero rule is DefaultSave). A class never
// includes two kinds of status, which are saved only when listed in Codes:
// the retryable ones (408 Request Timeout, 409 Conflict, 425 Too Early,
// 429 Too Many Requests), which say "not now", and the router's own
// answers (404 Not Found, 405 Method Not Allowed), which the handler
// usually never produced: a mux that does not serve the operation's path
// answers 404 through the middleware, and saving it would replay that 404
// to every retry of the key after the wiring is fixed. Releasing them
// costs a handler's own 404 a second run, which had no effect either.
func (r SaveRule) Saves(status int) bool {
	if r.Classes == 0 && len(r.Codes) == 0 {
		r = DefaultSave
	}
	if slices.Contains(r.Codes, status) {
		return true
	}
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	if status < 100 || status > 599 {
		return false
	}
	return r.Classes&(1<<(status/100-1)) != 0
}

// Policy is the idempotency policy of one operation, as generated from its
// x-idempotent annotation. Generated code declares one per operation; the
// zero value of a duration or size field means the contract's default.
type Policy struct {
	// OperationID names the spec operation (for logs, events and problems).
	OperationID string
	// Method and Route identify the operation: the HTTP method and the
	// spec's path template, e.g. "/charges/{id}". The fingerprint hashes
	// Route as written here.
	Method string
	Route  string
	// BasePaths are the servers' base paths the route is served under
	// (e.g. "/v1"): requests are matched against base path + Route for each
	// of them. Empty means the route is matched as it is.
	BasePaths []string

	// Scope is the key namespace (default: the operation id).
	Scope string

	Key       KeySource
	KeyName   string   // header or query parameter name
	KeyFields []string // dotted JSON paths, for KeyFromFields
	// Optional: a request without a key runs unprotected instead of 400.
	Optional bool

	Principal PrincipalMode
	// Challenges are the WWW-Authenticate challenges of the 401 the wrapper
	// answers when the caller of a PrincipalAuth operation cannot be
	// identified, e.g. `Bearer` or `Basic realm="Payments"` (RFC 9110
	// §11.6.1 asks a 401 for at least one). idemgen generates them from the
	// operation's security schemes; an apiKey scheme has no HTTP
	// authentication scheme and gives none.
	Challenges []string

	// FingerprintInclude / FingerprintExclude are JSON Pointers (RFC 6901)
	// that select which parts of a JSON body count in the fingerprint. At
	// most one of them is set.
	FingerprintInclude []string
	FingerprintExclude []string

	TTL   time.Duration // default 24h
	Lease time.Duration // default 60s
	Wait  time.Duration // default 0: 409 at once

	// ReplayHeaders are replayed in addition to the safe defaults
	// (CONTRACT §3), canonical MIME header names.
	ReplayHeaders []string
	// Save is the save rule; the zero value means DefaultSave.
	Save SaveRule

	MaxResponseBytes int64 // default 1 MiB
	MaxRequestBytes  int64 // default 4 MiB

	Transactional bool
}

// Contract defaults for a Policy's zero-valued fields.
const (
	DefaultTTL              = 24 * time.Hour
	DefaultLease            = 60 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxRequestBytes  = 4 << 20
)
