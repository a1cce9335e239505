package runtime

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// MemoryStore is an in-process Store (and TxStore) for tests and
// single-process services. Records live in a map guarded by one mutex, so
// every method is atomic. It forgets everything when the process ends: use a
// SQL store when more than one process serves the same keys.
//
// The SavedResponse that Claim returns for a completed record is shared with
// the store and must be treated as read-only.
type MemoryStore struct {
	mu      sync.Mutex
	now     func() time.Time
	records map[RecordKey]*memRecord
	msg     memMessages // processed ids and the outbox (memory_message.go)
}

type memRecord struct {
	completed bool
	// released: the attempt gave the key back. The record stays (as in the
	// SQL stores) so that the next claim continues the epoch count and a
	// worker fenced out before the release stays fenced out.
	released           bool
	epoch              int64
	fingerprint        [32]byte
	fingerprintVersion int
	leaseUntil         time.Time
	expiresAt          time.Time
	response           *SavedResponse
}

// NewMemoryStore returns an empty MemoryStore on the real clock.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{now: time.Now, records: make(map[RecordKey]*memRecord), msg: newMemMessages()}
}

// SetClock replaces the store's clock (tests use it to move time without
// sleeping). A nil now restores time.Now.
func (s *MemoryStore) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// Len reports how many records the store holds, expired ones included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	rec, ok := s.records[req.RecordKey]
	if ok && (rec.released || !now.Before(rec.expiresAt)) {
		// Released or expired: treated as absent. The epoch keeps counting
		// so that a worker still holding an old epoch stays fenced.
		rec.completed = false
		rec.released = false
		rec.response = nil
		rec.epoch++
		rec.fingerprint = req.Fingerprint
		rec.fingerprintVersion = req.FingerprintVersion
		rec.leaseUntil = now.Add(req.Lease)
		rec.expiresAt = now.Add(req.TTL)
		return ClaimResult{State: Acquired, Epoch: rec.epoch}, nil
	}
	if !ok {
		// A fresh record's epoch starts at the clock in microseconds, so
		// that a record re-created after Sweep deleted the key's previous
		// one follows every epoch that one handed out.
		rec = &memRecord{
			epoch:              now.UnixMicro(),
			fingerprint:        req.Fingerprint,
			fingerprintVersion: req.FingerprintVersion,
			leaseUntil:         now.Add(req.Lease),
			expiresAt:          now.Add(req.TTL),
		}
		s.records[req.RecordKey] = rec
		return ClaimResult{State: Acquired, Epoch: rec.epoch}, nil
	}
	if rec.completed {
		return ClaimResult{
			State:              Completed,
			Epoch:              rec.epoch,
			Fingerprint:        rec.fingerprint,
			FingerprintVersion: rec.fingerprintVersion,
			Response:           rec.response,
			Tombstone:          rec.response == nil,
		}, nil
	}
	if now.Before(rec.leaseUntil) {
		return ClaimResult{
			State:              InProgress,
			Epoch:              rec.epoch,
			Fingerprint:        rec.fingerprint,
			FingerprintVersion: rec.fingerprintVersion,
			LeaseRemaining:     rec.leaseUntil.Sub(now),
		}, nil
	}
	// In progress with an ended lease: take it over.
	rec.epoch++
	rec.fingerprint = req.Fingerprint
	rec.fingerprintVersion = req.FingerprintVersion
	rec.leaseUntil = now.Add(req.Lease)
	rec.expiresAt = now.Add(req.TTL)
	return ClaimResult{State: Acquired, Epoch: rec.epoch, TakenOver: true}, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(ctx context.Context, c Completion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completeLocked(c)
}

func (s *MemoryStore) completeLocked(c Completion) error {
	rec, ok := s.records[c.RecordKey]
	if !ok || !rec.owned(c.Epoch) {
		return ErrFenced
	}
	rec.completed = true
	rec.response = cloneResponse(c.Response)
	rec.expiresAt = s.now().Add(c.TTL)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, key RecordKey, epoch int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[key]
	if !ok || !rec.owned(epoch) {
		return ErrFenced
	}
	rec.released = true
	return nil
}

// owned reports whether the record is in progress at epoch.
func (r *memRecord) owned(epoch int64) bool {
	return !r.completed && !r.released && r.epoch == epoch
}

// Sweep implements Store. It deletes expired records and then, with what
// is left of limit, processed message ids older than the retention (see
// SetProcessedRetention), as the SQL stores do.
func (s *MemoryStore) Sweep(ctx context.Context, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := 0
	for k, rec := range s.records {
		if n >= limit {
			break
		}
		if !now.Before(rec.expiresAt) {
			delete(s.records, k)
			n++
		}
	}
	return n + s.sweepProcessedLocked(now, limit-n), nil
}

// BeginTx implements TxStore. The transaction has no handle (Handle returns
// nil); its completion is applied atomically at Commit.
func (s *MemoryStore) BeginTx(ctx context.Context) (Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &memTx{s: s}, nil
}

type memTx struct {
	s       *MemoryStore
	pending *Completion
	done    bool
	// marks are the message ids this transaction holds (MarkProcessed),
	// events the outbox events it added; both apply at Commit.
	marks  []msgKey
	events []OutboxEvent
}

func (t *memTx) Handle() any { return nil }

func (t *memTx) Complete(ctx context.Context, c Completion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.done {
		return errTxDone
	}
	t.s.mu.Lock()
	rec, ok := t.s.records[c.RecordKey]
	fenced := !ok || !rec.owned(c.Epoch)
	t.s.mu.Unlock()
	if fenced {
		return ErrFenced
	}
	cc := c
	cc.Response = cloneResponse(c.Response)
	t.pending = &cc
	return nil
}

func (t *memTx) Commit(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	t.done = true
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.pending != nil {
		if err := t.s.completeLocked(*t.pending); err != nil {
			t.s.endMarksLocked(t, false)
			return err
		}
	}
	t.s.endMarksLocked(t, true)
	t.s.addEventsLocked(t.events)
	return nil
}

func (t *memTx) Rollback(ctx context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	t.pending = nil
	t.s.mu.Lock()
	t.s.endMarksLocked(t, false)
	t.s.mu.Unlock()
	return nil
}

type txDoneError struct{}

func (txDoneError) Error() string { return "idempotency: transaction already committed or rolled back" }

var errTxDone error = txDoneError{}

// cloneResponse deep-copies r. Header value slices are clipped so that an
// append by a later reader never writes into the stored array.
func cloneResponse(r *SavedResponse) *SavedResponse {
	if r == nil {
		return nil
	}
	out := &SavedResponse{Status: r.Status, Header: make(http.Header, len(r.Header))}
	for k, vs := range r.Header {
		cp := make([]string, len(vs))
		copy(cp, vs)
		out.Header[k] = cp[:len(cp):len(cp)]
	}
	out.Body = append([]byte{}, r.Body...)
	return out
}

var _ TxStore = (*MemoryStore)(nil)
