package generator

import (
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

// The policy types are the runtime's own (one model: what the generator
// builds is what the middleware runs); these names keep the generator's
// API.

// KeySource is idemrt.KeySource.
type KeySource = idemrt.KeySource

const (
	KeyHeader = idemrt.KeyFromHeader
	KeyQuery  = idemrt.KeyFromQuery
	KeyFields = idemrt.KeyFromFields
	KeyBody   = idemrt.KeyFromBody
)

// Principal is idemrt.PrincipalMode.
type Principal = idemrt.PrincipalMode

const (
	PrincipalAnonymous = idemrt.PrincipalAnonymous
	PrincipalAuth      = idemrt.PrincipalAuth
)

// Status classes of a save rule, as a bit set (idemrt.StatusClass).
const (
	Class1xx = idemrt.Class1xx
	Class2xx = idemrt.Class2xx
	Class3xx = idemrt.Class3xx
	Class4xx = idemrt.Class4xx
	Class5xx = idemrt.Class5xx
)

// SaveRule is idemrt.SaveRule.
type SaveRule = idemrt.SaveRule

// Contract defaults (CONTRACT §1), the runtime's.
const (
	DefaultKeyHeader        = "Idempotency-Key"
	DefaultTTL              = idemrt.DefaultTTL
	DefaultLease            = idemrt.DefaultLease
	DefaultMaxResponseBytes = idemrt.DefaultMaxResponseBytes
	DefaultMaxRequestBytes  = idemrt.DefaultMaxRequestBytes
	DefaultSaveClasses      = Class2xx | Class4xx
	DefaultTable            = "idempotency_keys"
)

// Operation is one annotated operation: its resolved policy, the
// idemrt.Policy the emitter writes and the middleware runs (every default
// applied, every value validated, Route "/" for an operation without a
// route of its own), and the generator's own facts about it.
type Operation struct {
	// Policy is the runtime policy. Its OperationID names the operation
	// in the policy: the spec's operationId, or the derived GoName when
	// the spec has none (Operation.OperationID is the spec's alone).
	idemrt.Policy
	// GoName is the exported Go identifier made from the operationId (or
	// from the method and path when there is none), e.g. CreateCharge.
	GoName string
	// OperationID is the spec's operationId; empty when the spec has none.
	OperationID string
	Kind        OpKind
	// Path is the path template for InPaths, the webhook's name for
	// InWebhooks, the callback's URL expression for InCallbacks.
	Path string
	// Callback names the callback and its parent operation (InCallbacks).
	Callback     string
	ParentOp     string
	ParentMethod string
	ParentPath   string
	Summary      string
	Pos          Pos
}

// ID names the operation in the policy (Policy.OperationID).
func (o *Operation) ID() string { return o.Policy.OperationID }

// Routed reports whether the operation is served at a route of its own,
// so that Middleware can match it.
func (o *Operation) Routed() bool { return o.Kind == InPaths }
