package storekit

import (
	"fmt"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Record states, as the stores' state column (and the Redis store's field
// s) holds them.
const (
	StateInProgress = 1
	StateCompleted  = 2
	// StateReleased: given up by its owner; absent to claims, kept until
	// it expires so that the next claim continues its epoch.
	StateReleased = 3
)

// MaxField is the longest scope, key, consumer name or message id, in
// bytes, that the stores hold.
const MaxField = 255

// MaxClaimAttempts bounds how often a claim re-runs when the record changed
// between its read and its write (another attempt claimed, completed or
// released the key meanwhile). Each retry follows someone else's progress.
const MaxClaimAttempts = 16

// CheckRecordKey refuses a scope or key that is empty or longer than
// MaxField bytes.
func CheckRecordKey(k idemrt.RecordKey) error {
	if len(k.Scope) == 0 || len(k.Scope) > MaxField {
		return fmt.Errorf("idempotency store: scope must be 1 to %d bytes, got %d", MaxField, len(k.Scope))
	}
	if len(k.Key) == 0 || len(k.Key) > MaxField {
		return fmt.Errorf("idempotency store: key must be 1 to %d bytes, got %d", MaxField, len(k.Key))
	}
	return nil
}

// CheckMessage refuses a consumer name or message id that is empty or
// longer than MaxField bytes.
func CheckMessage(consumer, messageID string) error {
	if len(consumer) == 0 || len(consumer) > MaxField {
		return fmt.Errorf("idempotency store: consumer name must be 1 to %d bytes, got %d", MaxField, len(consumer))
	}
	if len(messageID) == 0 || len(messageID) > MaxField {
		return fmt.Errorf("idempotency store: message id must be 1 to %d bytes, got %d", MaxField, len(messageID))
	}
	return nil
}

// DurationUnits converts d to whole units, rounding up, so that a lease is
// never shorter than asked. Zero or less is 0.
func DurationUnits(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}

// Completion is what a store's completion statement writes for an
// idemrt.Completion.
type Completion struct {
	Status    int32
	Headers   []byte // EncodeHeader's encoding; empty for a tombstone
	Body      []byte // never nil (the columns are NOT NULL)
	Tombstone bool   // no response is saved: retries get the tombstone answer
}

// Tombstone is the Completion of a tombstone.
func Tombstone() Completion {
	return Completion{Tombstone: true, Headers: []byte{}, Body: []byte{}}
}

// CompletionOf checks c's record key and encodes its response.
func CompletionOf(c idemrt.Completion) (Completion, error) {
	if err := CheckRecordKey(c.RecordKey); err != nil {
		return Completion{}, err
	}
	if c.Response == nil {
		return Tombstone(), nil
	}
	body := c.Response.Body
	if body == nil {
		body = []byte{}
	}
	return Completion{Status: int32(c.Response.Status), Headers: EncodeHeader(c.Response.Header), Body: body}, nil
}

// Complete runs a store's completion statement for c: write saves cp (c's
// response, encoded; its TTL and record key are c's) and returns the rows
// it changed. None is ErrFenced: the record is no longer c.Epoch's.
func Complete(c idemrt.Completion, write func(cp Completion) (int64, error)) error {
	cp, err := CompletionOf(c)
	if err != nil {
		return err
	}
	n, err := write(cp)
	if err != nil {
		return fmt.Errorf("idempotency store: complete: %w", err)
	}
	if n == 0 {
		return idemrt.ErrFenced
	}
	return nil
}

// Release runs a store's release statement for key: release gives up the
// in-progress record held at its epoch and returns the rows it changed.
// None is ErrFenced.
func Release(key idemrt.RecordKey, release func() (int64, error)) error {
	if err := CheckRecordKey(key); err != nil {
		return err
	}
	n, err := release()
	if err != nil {
		return fmt.Errorf("idempotency store: release: %w", err)
	}
	if n == 0 {
		return idemrt.ErrFenced
	}
	return nil
}

// Record is a live stored record as a store's lookup reads it: completed,
// or in progress within its lease (on the database's clock).
type Record struct {
	State              int64 // StateInProgress or StateCompleted
	Epoch              int64
	Fingerprint        []byte
	FingerprintVersion int64
	LeaseRemaining     time.Duration // of a record in progress
	Status             int64
	Headers            []byte // EncodeHeader's encoding
	Body               []byte
	Tombstone          bool
}

// Result is the ClaimResult of the live record r: InProgress with the
// lease left, or Completed with the saved response (or tombstone). A
// fingerprint of the wrong length, an unknown state or corrupt headers are
// errors.
func (r Record) Result() (idemrt.ClaimResult, error) {
	res := idemrt.ClaimResult{Epoch: r.Epoch, FingerprintVersion: int(r.FingerprintVersion)}
	if len(r.Fingerprint) != len(res.Fingerprint) {
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: stored fingerprint has %d bytes, want %d", len(r.Fingerprint), len(res.Fingerprint))
	}
	copy(res.Fingerprint[:], r.Fingerprint)
	switch r.State {
	case StateInProgress:
		res.State = idemrt.InProgress
		res.LeaseRemaining = max(r.LeaseRemaining, 0)
	case StateCompleted:
		res.State = idemrt.Completed
		if r.Tombstone {
			res.Tombstone = true
			break
		}
		h, err := DecodeHeader(r.Headers)
		if err != nil {
			return idemrt.ClaimResult{}, err
		}
		res.Response = &idemrt.SavedResponse{Status: int(r.Status), Header: h, Body: r.Body}
	default:
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: unknown record state %d", r.State)
	}
	return res, nil
}
