package generator

import (
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// The typed model: what the emitters read. It is built once from the spec
// and its annotations and never refers back to kin-openapi types, so the
// emitters know nothing of OpenAPI versions or document shapes.

// Model is every annotated operation of one document.
type Model struct {
	// Package is the Go package name of the generated code.
	Package string
	// SpecName is the spec file's base name, named in the package doc.
	SpecName string
	// Operations are sorted by GoName.
	Operations []*Operation
	// OptOuts are the operations marked x-idempotent: false, or opted out
	// with a reason (x-idempotent: {opt-out: reason}), in document order.
	OptOuts []*OptOut
}

// OptOut is an operation deliberately left unprotected.
type OptOut struct {
	Kind        OpKind
	Method      string
	Path        string
	OperationID string
	// Reason is the opt-out's reason; empty for x-idempotent: false.
	Reason string
	Pos    Pos
}

// OpKind says where in the document an operation is declared.
type OpKind int

const (
	// InPaths: an operation under `paths`, served at a route.
	InPaths OpKind = iota + 1
	// InWebhooks: a webhook (OpenAPI 3.1): a request the API sends to its
	// consumers. It has no route of its own; the consumer mounts it.
	InWebhooks
	// InCallbacks: a callback of a path operation, whose URL is a runtime
	// expression. Like a webhook it has no route of its own.
	InCallbacks
)

// KeySource mirrors idemrt.KeySource.
type KeySource int

const (
	KeyHeader KeySource = iota + 1
	KeyQuery
	KeyFields
	KeyBody
)

// Principal mirrors idemrt.PrincipalMode.
type Principal int

const (
	PrincipalAnonymous Principal = iota + 1
	PrincipalAuth
)

// Status classes of a save rule, as a bit set (mirrors idemrt.StatusClass).
const (
	Class1xx = 1 << iota
	Class2xx
	Class3xx
	Class4xx
	Class5xx
)

// SaveRule mirrors idemrt.SaveRule.
type SaveRule struct {
	Classes int
	Codes   []int
}

// Contract defaults (CONTRACT §1).
const (
	DefaultKeyHeader        = "Idempotency-Key"
	DefaultTTL              = 24 * time.Hour
	DefaultLease            = 60 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxRequestBytes  = 4 << 20
	DefaultSaveClasses      = Class2xx | Class4xx
	DefaultTable            = "idempotency_keys"
)

// Operation is one annotated operation and its resolved policy: every
// default applied, every value validated.
type Operation struct {
	// GoName is the exported Go identifier made from the operationId (or
	// from the method and path when there is none), e.g. CreateCharge.
	GoName string
	// OperationID is the spec's operationId; empty when the spec has none.
	OperationID string
	// ID names the operation in the policy: OperationID, or the derived
	// GoName when the spec has none.
	ID   string
	Kind OpKind
	// Method is upper case (POST).
	Method string
	// Path is the path template for InPaths, the webhook's name for
	// InWebhooks, the callback's URL expression for InCallbacks.
	Path string
	// Callback names the callback and its parent operation (InCallbacks).
	Callback      string
	ParentOp      string
	ParentMethod  string
	ParentPath    string
	BasePaths     []string
	Summary       string
	Scope         string // empty: the ID
	Key           KeySource
	KeyName       string
	KeyFields     []string
	Optional      bool
	Principal     Principal
	Challenges    []string // WWW-Authenticate challenges of the 401 (PrincipalAuth)
	FingerprintIn []string
	FingerprintEx []string
	TTL           time.Duration
	Lease         time.Duration
	Wait          time.Duration
	ReplayHeaders []string
	Save          SaveRule
	MaxResponse   int64
	MaxRequest    int64
	Transactional bool
	Pos           Pos
}

// Routed reports whether the operation is served at a route of its own,
// so that Middleware can match it.
func (o *Operation) Routed() bool { return o.Kind == InPaths }

// Policy is the idemrt.Policy the emitter writes for o: what the runtime
// validates and runs.
func (o *Operation) Policy() *idemrt.Policy {
	p := &idemrt.Policy{
		OperationID:        o.ID,
		Method:             o.Method,
		Route:              "/",
		BasePaths:          o.BasePaths,
		Scope:              o.Scope,
		Key:                idemrt.KeySource(o.Key),
		KeyName:            o.KeyName,
		KeyFields:          o.KeyFields,
		Optional:           o.Optional,
		Principal:          idemrt.PrincipalMode(o.Principal),
		Challenges:         o.Challenges,
		FingerprintInclude: o.FingerprintIn,
		FingerprintExclude: o.FingerprintEx,
		TTL:                o.TTL,
		Lease:              o.Lease,
		Wait:               o.Wait,
		ReplayHeaders:      o.ReplayHeaders,
		Save:               idemrt.SaveRule{Classes: idemrt.StatusClass(o.Save.Classes), Codes: o.Save.Codes},
		MaxResponseBytes:   o.MaxResponse,
		MaxRequestBytes:    o.MaxRequest,
		Transactional:      o.Transactional,
	}
	if o.Routed() {
		p.Route = o.Path
	}
	return p
}
