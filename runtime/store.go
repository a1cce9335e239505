package runtime

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// RecordKey identifies one idempotency record: (scope, principal hash, key).
// The principal is never stored in clear; PrincipalHash is its SHA-256
// (see HashPrincipal).
type RecordKey struct {
	Scope         string
	PrincipalHash [32]byte
	Key           string
}

// ClaimRequest asks a Store to claim a key for one attempt.
type ClaimRequest struct {
	RecordKey
	// Fingerprint is the request fingerprint (SHA-256) and FingerprintVersion
	// the algorithm version that produced it.
	Fingerprint        [32]byte
	FingerprintVersion int
	// Lease is how long the claim holds before another attempt may take it
	// over. TTL is how long the record lives in all (it is set again when the
	// record completes). Stores measure both on their own clock (the database's
	// for SQL stores), never on the caller's.
	Lease time.Duration
	TTL   time.Duration
}

// ClaimState is what a claim found.
type ClaimState int

const (
	// Acquired: the caller owns the key at Epoch and must run the handler,
	// then Complete or Release with that epoch.
	Acquired ClaimState = iota + 1
	// InProgress: another attempt holds a live lease.
	InProgress
	// Completed: a result is saved (or a tombstone, see Record.Tombstone).
	Completed
)

func (s ClaimState) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case InProgress:
		return "in_progress"
	case Completed:
		return "completed"
	}
	return "unknown"
}

// ClaimResult is the outcome of Store.Claim.
type ClaimResult struct {
	State ClaimState
	// Epoch is the fencing token of the record: for Acquired, the caller's
	// own epoch: a fresh record starts at the store's clock in microseconds
	// (so a key re-created after Sweep deleted its record follows every
	// epoch the deleted record handed out), and a takeover or a claim of a
	// released record is previous+1.
	Epoch int64
	// TakenOver is true when Acquired replaced an in-progress record whose
	// lease had ended.
	TakenOver bool
	// Fingerprint and FingerprintVersion of the existing record, for
	// InProgress and Completed.
	Fingerprint        [32]byte
	FingerprintVersion int
	// LeaseRemaining is how long the live lease still runs (InProgress).
	LeaseRemaining time.Duration
	// Response is the saved response (Completed). Nil with Tombstone set when
	// the result was too large to save.
	Response  *SavedResponse
	Tombstone bool
}

// SavedResponse is what a completed record replays.
type SavedResponse struct {
	Status int
	Header http.Header // only the replayable headers, every value kept
	Body   []byte
}

// Completion is what Store.Complete writes.
type Completion struct {
	RecordKey
	Epoch int64
	// Response is nil for a tombstone.
	Response *SavedResponse
	// TTL: the record expires TTL after completion, on the store's clock.
	TTL time.Duration
}

// ErrFenced is returned by Complete and Release when the record no longer
// carries the caller's epoch: its lease ended and another attempt took the
// key over (or the record expired and was swept).
var ErrFenced = errors.New("idempotency: record is owned by a newer epoch")

// Store persists idempotency records. Implementations must be safe for
// concurrent use, and every method must be atomic on its own: Claim in
// particular is one atomic step (never check-then-insert), so that of N
// concurrent claims of an absent key exactly one is Acquired.
//
// Expired records (older than their TTL) are treated as absent by Claim even
// before Sweep deletes them. Lease and TTL are measured on the store's clock.
type Store interface {
	// Claim looks the key up and, if it is absent, expired, or in progress
	// with an ended lease, claims it in the same atomic step.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Complete saves the result of the attempt that holds Epoch. It returns
	// ErrFenced if the record has moved to another epoch.
	Complete(ctx context.Context, c Completion) error
	// Release deletes the in-progress record held at epoch, so that the key
	// may run again. It returns ErrFenced if the record has moved on.
	Release(ctx context.Context, key RecordKey, epoch int64) error
	// Sweep deletes up to limit expired records and reports how many it
	// deleted. Callers loop until it returns fewer than limit. A store may
	// leave a record for up to one lease after it expired (the SQL stores
	// do, so that a completion need not move their indexed sweep column);
	// claims treat it as absent meanwhile.
	Sweep(ctx context.Context, limit int) (int, error)
}

// StoreIdentifier is a Store that names the records it keeps, so that two
// Store values over the same table of the same database are known to be
// one store: a wrapper mounted inside another one for the same key (each
// with its own value) answers 500 mounted-twice rather than 409 in-progress
// for ever (docs/contract.md §1). Without it, stores are the same when they
// are the same value (the same pointer).
type StoreIdentifier interface {
	// StoreIdentity names the records the store claims: the database (a
	// server's own identity, not an address it was reached by, where the
	// database has one) and the table, decided when the store was made.
	// Two stores with the same non-empty identity claim the same records;
	// two over different records must never have the same one. "" means
	// unknown. The runtime asks it once, at start-up.
	StoreIdentity() string
}

// TxStore is a Store that supports transactional mode: the handler's own
// writes and the completion commit in one database transaction.
type TxStore interface {
	Store
	// BeginTx opens a transaction on the store's database.
	BeginTx(ctx context.Context) (Tx, error)
}

// Tx is one transaction opened by TxStore.BeginTx.
type Tx interface {
	// Handle is the driver's transaction (pgx.Tx, *sql.Tx) that the handler
	// uses for its writes. Generated code offers a typed accessor for it.
	Handle() any
	// Complete writes the completion inside the transaction, fenced by epoch
	// like Store.Complete.
	Complete(ctx context.Context, c Completion) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// ClaimTxStore is a TxStore whose transactional mode commits once: the
// in-progress record, the handler's writes and the completion are written
// in one transaction, opened by BeginClaim, so that a first request costs
// one durable commit. When Options.Store implements it, transactional
// operations use BeginClaim instead of Claim then BeginTx.
//
// While the transaction is open, nothing of the attempt is visible to other
// sessions: a concurrent attempt with the same key learns of it through the
// database's own locking (its claim of the key would wait on the
// uncommitted record) and is reported InProgress, or waits for the outcome.
// A rollback, a failed commit, or a crash of the process leaves no trace:
// the key is claimable again at once, with no lease to wait out and no
// epoch to fence.
type ClaimTxStore interface {
	TxStore
	// BeginClaim claims req's key inside a new transaction. For Acquired,
	// the returned Tx is open and already holds the record in progress at
	// the result's Epoch; the caller runs the handler in it, then calls
	// Tx.Complete and Commit, or Rollback. For any other state the Tx is
	// nil and the result is what Claim would report; InProgress for an
	// attempt whose record is not committed yet carries the request's own
	// fingerprint (the other attempt's is not visible) and LeaseRemaining 0.
	// The Tx may be used until ctx ends: the caller cancels ctx once the
	// transaction is over, and a store on database/sql rolls it back when
	// ctx ends first.
	BeginClaim(ctx context.Context, req ClaimRequest) (Tx, ClaimResult, error)
}
