package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// DefaultProcessedRetention is how long MemoryStore keeps processed
// message ids unless SetProcessedRetention says otherwise; the generated
// SQL stores default to the same 14 days.
const DefaultProcessedRetention = 14 * 24 * time.Hour

// memMessages is MemoryStore's share of messaging: processed ids (with the
// ids open transactions hold) and the outbox. Guarded by MemoryStore.mu.
type memMessages struct {
	retention time.Duration
	processed map[msgKey]time.Time
	// held: ids marked by a transaction that has not ended; a second
	// MarkProcessed of one waits for it, as a SQL insert waits on the
	// uncommitted row.
	held   map[msgKey]*memHold
	events []*memEvent // in the order they were committed
	head   int         // events before head are sent
	byID   map[string]*memEvent
}

type msgKey struct{ consumer, id string }

type memHold struct {
	tx   *memTx
	done chan struct{}
}

type memEvent struct {
	ev         OutboxEvent
	leaseUntil time.Time
	sent       bool
	sentAt     time.Time
}

func newMemMessages() memMessages {
	return memMessages{
		retention: DefaultProcessedRetention,
		processed: make(map[msgKey]time.Time),
		held:      make(map[msgKey]*memHold),
		byID:      make(map[string]*memEvent),
	}
}

var (
	_ MessageStore = (*MemoryStore)(nil)
	_ OutboxWriter = (*MemoryStore)(nil)
	_ OutboxStore  = (*MemoryStore)(nil)
)

// SetProcessedRetention sets how long processed message ids are kept before
// Sweep deletes them (counted from the commit that marked them). Zero or
// less keeps them for ever.
func (s *MemoryStore) SetProcessedRetention(d time.Duration) {
	s.mu.Lock()
	s.msg.retention = d
	s.mu.Unlock()
}

// ProcessedLen reports how many processed message ids the store holds.
func (s *MemoryStore) ProcessedLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msg.processed)
}

func (s *MemoryStore) ownTx(tx Tx) (*memTx, error) {
	t, ok := tx.(*memTx)
	if !ok || t == nil || t.s != s {
		return nil, fmt.Errorf("idempotency: memory store: a transaction of another store (%T)", tx)
	}
	if t.done {
		return nil, errTxDone
	}
	return t, nil
}

// MarkProcessed implements MessageStore. The mark applies when tx
// commits; until then a concurrent MarkProcessed of the same id waits
// (or gives up when its ctx ends).
func (s *MemoryStore) MarkProcessed(ctx context.Context, tx Tx, consumer, messageID string) (bool, error) {
	t, err := s.ownTx(tx)
	if err != nil {
		return false, err
	}
	if consumer == "" || messageID == "" {
		return false, errors.New("idempotency: memory store: empty consumer or message id")
	}
	k := msgKey{consumer, messageID}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.mu.Lock()
		if _, ok := s.msg.processed[k]; ok {
			s.mu.Unlock()
			return false, nil
		}
		h, ok := s.msg.held[k]
		if !ok {
			s.msg.held[k] = &memHold{tx: t, done: make(chan struct{})}
			t.marks = append(t.marks, k)
			s.mu.Unlock()
			return true, nil
		}
		s.mu.Unlock()
		if h.tx == t {
			return false, nil // marked earlier in this transaction
		}
		select {
		case <-h.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// endMarksLocked ends t's holds: committed, they become processed ids.
func (s *MemoryStore) endMarksLocked(t *memTx, commit bool) {
	now := s.now()
	for _, k := range t.marks {
		if commit {
			s.msg.processed[k] = now
		}
		if h := s.msg.held[k]; h != nil && h.tx == t {
			close(h.done)
			delete(s.msg.held, k)
		}
	}
	t.marks = nil
}

func (s *MemoryStore) sweepProcessedLocked(now time.Time, limit int) int {
	if limit <= 0 || s.msg.retention <= 0 {
		return 0
	}
	n := 0
	for k, at := range s.msg.processed {
		if n >= limit {
			break
		}
		if !now.Before(at.Add(s.msg.retention)) {
			delete(s.msg.processed, k)
			n++
		}
	}
	return n
}

// AddEvents implements OutboxWriter: the events are added when tx commits.
func (s *MemoryStore) AddEvents(ctx context.Context, tx Tx, events ...OutboxEvent) error {
	t, err := s.ownTx(tx)
	if err != nil {
		return err
	}
	evs, err := PrepareEvents(events)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := make(map[string]bool, len(t.events)+len(evs))
	for _, p := range t.events {
		used[p.ID] = true
	}
	for _, ev := range evs {
		if used[ev.ID] || s.msg.byID[ev.ID] != nil {
			return fmt.Errorf("idempotency: memory store: outbox event id %q is already used", ev.ID)
		}
		used[ev.ID] = true
	}
	t.events = append(t.events, evs...)
	return nil
}

func (s *MemoryStore) addEventsLocked(evs []OutboxEvent) {
	now := s.now()
	for _, ev := range evs {
		ev.CreatedAt = now
		e := &memEvent{ev: ev}
		s.msg.events = append(s.msg.events, e)
		s.msg.byID[ev.ID] = e
	}
}

// ClaimEvents implements OutboxStore.
func (s *MemoryStore) ClaimEvents(ctx context.Context, limit int, lease time.Duration) ([]OutboxEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 || lease <= 0 {
		return nil, errors.New("idempotency: ClaimEvents: limit and lease must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for s.msg.head < len(s.msg.events) && s.msg.events[s.msg.head].sent {
		s.msg.head++
	}
	blocked := make(map[string]bool) // keys with an earlier unsent event leased
	var out []OutboxEvent
	for _, e := range s.msg.events[s.msg.head:] {
		if len(out) >= limit {
			break
		}
		if e.sent {
			continue
		}
		if now.Before(e.leaseUntil) {
			blocked[e.ev.Key] = e.ev.Key != ""
			continue
		}
		if blocked[e.ev.Key] {
			continue
		}
		e.leaseUntil = now.Add(lease)
		ev := e.ev
		ev.Payload = append([]byte(nil), ev.Payload...)
		ev.Headers = maps.Clone(ev.Headers)
		out = append(out, ev)
	}
	return out, nil
}

// MarkSent implements OutboxStore.
func (s *MemoryStore) MarkSent(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, id := range ids {
		if e := s.msg.byID[id]; e != nil && !e.sent {
			e.sent, e.sentAt = true, now
		}
	}
	return nil
}

// ReleaseEvents implements OutboxStore.
func (s *MemoryStore) ReleaseEvents(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if e := s.msg.byID[id]; e != nil && !e.sent {
			e.leaseUntil = time.Time{}
		}
	}
	return nil
}

// SweepSent implements OutboxStore.
func (s *MemoryStore) SweepSent(ctx context.Context, retention time.Duration, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := 0
	kept := s.msg.events[:0]
	for _, e := range s.msg.events {
		if n < limit && e.sent && !now.Before(e.sentAt.Add(retention)) {
			delete(s.msg.byID, e.ev.ID)
			n++
			continue
		}
		kept = append(kept, e)
	}
	clear(s.msg.events[len(kept):])
	s.msg.events = kept
	s.msg.head = 0
	return n, nil
}

// OutboxLen reports how many events the store's outbox holds, and how
// many of them are not sent yet.
func (s *MemoryStore) OutboxLen() (total, unsent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.msg.events {
		if !e.sent {
			unsent++
		}
	}
	return len(s.msg.events), unsent
}
