// Package storekit is the part of idemgen's generated key stores that does
// not depend on the spec, the dialect or sqlc's generated types: the codec
// of saved responses, the checks of record keys and message ids, the
// conversion of a stored record to the runtime's ClaimResult, the outbox's
// event headers, and the sweep that empties the records and processed-id
// tables. The stores idemgen generates (idemgen_store.go and its siblings)
// import it, as does the Redis store (stores/redisstore), so that every
// store encodes and decodes records the same way, and the code lives once
// instead of in every generated package.
//
// The package is for generated code and the stores of this repository;
// applications do not call it. Its exported names are a stable API for the
// generated code of one idemgen release line: a generated store refers to
// SupportPackageIsVersionN, and an incompatible change of this package
// removes that constant (and adds SupportPackageIsVersionN+1), so that code
// generated for the old API fails to compile, naming the constant, instead
// of misbehaving. Regenerating with the idemgen of the module version your
// go.mod requires (go generate ./...) fixes it.
//
// Like the generated stores, nothing here reads the application's clock:
// leases, TTLs and retentions travel as durations, and the database
// decides every time.
//
// storekit imports the runtime (as idemrt) and the standard library only;
// its package pgkit, for the PostgreSQL stores, imports pgx as well.
package storekit

// SupportPackageIsVersion2 is referred to by generated stores
// (const _ = storekit.SupportPackageIsVersion2): code generated against
// this API fails to compile against a storekit that dropped it. Version 1
// went when Sweep and the outbox's helpers became generic in sqlc's LIMIT
// type and took the stores' statements (Complete, Release, ClaimEvents,
// MarkSent, ReleaseEvents, SweepSent).
const SupportPackageIsVersion2 = true
