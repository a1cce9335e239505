package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"
)

// MessageStore deduplicates deliveries (CONTRACT §5): the processed id is
// inserted in the same transaction as the consumer's own writes, so that
// the writes and the record of having made them commit together or not at
// all. The generated SQL stores and MemoryStore implement it.
type MessageStore interface {
	// BeginTx opens a transaction on the store's database.
	BeginTx(ctx context.Context) (Tx, error)
	// MarkProcessed records, inside tx, that consumer processed messageID,
	// in one atomic step (an insert that does nothing on a conflict, never
	// a read then a write). first is false when the id was already
	// processed. A concurrent transaction marking the same id waits for tx
	// to end and then sees its outcome: if tx rolls back, the id counts as
	// unprocessed.
	MarkProcessed(ctx context.Context, tx Tx, consumer, messageID string) (first bool, err error)
}

// ProcessOnce runs fn at most once per (consumer, messageID) with effect:
// it opens a transaction, marks the id processed in it, runs fn with the
// transaction in ctx (TxFromContext, and the generated package's typed
// TxFromContext, find it) and commits.
//
// A redelivery of a processed id returns ran=false and a nil error without
// running fn: acknowledge it. An error from fn (or a panic, which is
// re-raised) rolls the transaction back, so the id stays unprocessed and a
// redelivery runs fn again; ProcessOnce returns fn's error as it is. An
// error from the store (including the commit) is returned wrapped; the id
// may or may not have been recorded, and the next delivery finds out. A
// MarkProcessed that the database aborted (ErrTxAborted) is tried again in
// a new transaction, a few times, before fn runs. So:
// acknowledge the message when err is nil, and not otherwise.
//
// ran is true only when fn ran and its transaction committed. fn must do
// every write through the transaction; a side effect outside the database
// (an HTTP call, an e-mail) happens again on a redelivery after a rollback
// and needs the destination's own idempotency key (see docs/messaging.md).
func ProcessOnce(ctx context.Context, s MessageStore, consumer, messageID string, fn func(ctx context.Context) error) (ran bool, err error) {
	switch {
	case s == nil:
		return false, errors.New("idempotency: ProcessOnce: nil store")
	case fn == nil:
		return false, errors.New("idempotency: ProcessOnce: nil function")
	case consumer == "":
		return false, errors.New("idempotency: ProcessOnce: empty consumer name")
	case messageID == "":
		return false, fmt.Errorf("idempotency: ProcessOnce: consumer %q: empty message id (a message without an id cannot be deduplicated)", consumer)
	}
	for attempt := 1; ; attempt++ {
		ran, err := processOnce(ctx, s, consumer, messageID, fn)
		if errors.Is(err, errRetryMark) && attempt < maxMarkAttempts {
			continue
		}
		if errors.Is(err, errRetryMark) {
			err = fmt.Errorf("idempotency: ProcessOnce: marking %q processed aborted %d times: %w", messageID, attempt, err)
		}
		return ran, err
	}
}

// ErrTxAborted is what a MessageStore's MarkProcessed wraps when the
// database aborted the transaction (a deadlock between concurrent
// deliveries of one id: InnoDB's, when the transaction holding the id
// rolls back while two others wait for it). Nothing has run in the
// transaction yet, so ProcessOnce starts it again.
var ErrTxAborted = errors.New("idempotency: the database aborted the transaction")

// maxMarkAttempts bounds ProcessOnce's new transactions after ErrTxAborted.
const maxMarkAttempts = 8

// errRetryMark marks a MarkProcessed that failed with ErrTxAborted.
var errRetryMark = errors.New("transaction aborted while marking the message")

func processOnce(ctx context.Context, s MessageStore, consumer, messageID string, fn func(ctx context.Context) error) (ran bool, err error) {
	tx, err := s.BeginTx(ctx)
	if err != nil {
		return false, fmt.Errorf("idempotency: ProcessOnce: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// fn panicked (or an error path below): nothing of it commits.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	first, err := s.MarkProcessed(ctx, tx, consumer, messageID)
	if errors.Is(err, ErrTxAborted) {
		return false, fmt.Errorf("%w: %w", errRetryMark, err)
	}
	if err != nil {
		return false, fmt.Errorf("idempotency: ProcessOnce: %w", err)
	}
	if !first {
		// A redelivery: nothing was written, so end the transaction
		// without a commit.
		done = true
		if err := tx.Rollback(ctx); err != nil && ctx.Err() == nil {
			return false, fmt.Errorf("idempotency: ProcessOnce: ending the transaction of a redelivery: %w", err)
		}
		return false, nil
	}
	if err := fn(context.WithValue(ctx, txKey{}, tx)); err != nil {
		return false, err
	}
	done = true
	if err := tx.Commit(ctx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return false, fmt.Errorf("idempotency: ProcessOnce: commit: %w", err)
	}
	return true, nil
}

// OutboxEvent is one event written in the business transaction (see
// AddEvents) and published by a Relay.
type OutboxEvent struct {
	// ID is stable and unique: the broker's message id (Nats-Msg-Id, the
	// AMQP message-id property), by which the broker and the consumers
	// drop a re-publish. AddEvents sets a random one (128 bits, in hex)
	// when it is empty.
	ID string
	// Topic is the subject or routing key.
	Topic string
	// Key is the aggregate key (an order id, an account id): a relay
	// publishes the events of one key in the order they were added (see
	// OutboxStore.ClaimEvents and docs/messaging.md for how far this holds).
	// Events with an empty key are published in no particular order.
	Key     string
	Payload []byte
	Headers map[string]string
	// CreatedAt is when the event was added, on the database's clock; set
	// by the store (ClaimEvents returns it).
	CreatedAt time.Time
}

// Publisher publishes one event. It returns nil only once the broker has
// durably accepted it (a JetStream PubAck, an AMQP publisher confirm), and
// it must set the broker's message id to ev.ID, so that a re-publish of
// the same event (a relay that crashed after publishing and before marking
// the event sent) is dropped by the broker's duplicate window or by the
// consumer's ProcessOnce.
type Publisher interface {
	Publish(ctx context.Context, ev OutboxEvent) error
}

// OutboxWriter adds events to an outbox table inside a transaction the
// store opened (transactional mode, or ProcessOnce), so that the events
// commit with the business writes or not at all. The generated SQL stores
// and MemoryStore implement it.
type OutboxWriter interface {
	AddEvents(ctx context.Context, tx Tx, events ...OutboxEvent) error
}

// AddEvents adds events through the transaction in ctx: the one that
// transactional mode opened for the request, or ProcessOnce for a message.
// An event without an ID gets a random one (128 bits, in hex). It fails when ctx
// carries no transaction: an event written outside the business
// transaction could be published for a write that rolled back, or be lost
// for one that committed.
func AddEvents(ctx context.Context, w OutboxWriter, events ...OutboxEvent) error {
	if w == nil {
		return errors.New("idempotency: AddEvents: nil outbox")
	}
	tx, ok := TxFromContext(ctx)
	if !ok {
		return errors.New("idempotency: AddEvents: no transaction in the context (use a transactional operation or ProcessOnce)")
	}
	return w.AddEvents(ctx, tx, events...)
}

// newEventID returns a random event id: 32 hexadecimal digits (128 bits
// from crypto/rand).
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b[:])
}

// OutboxStore is the relay's side of an outbox table. Implementations must
// be safe for concurrent use by several relays, in one process or many.
type OutboxStore interface {
	// ClaimEvents leases up to limit unsent events, oldest first, for
	// lease (on the store's clock): until the lease ends, or the event is
	// marked sent or released, no other claim returns them. An event is
	// not returned while an earlier unsent event of the same Key is
	// leased, so that relays publish one key's events in order (events
	// with an empty Key have no order).
	ClaimEvents(ctx context.Context, limit int, lease time.Duration) ([]OutboxEvent, error)
	// MarkSent records that the events with these ids were published.
	// Marking an event that is already sent (or swept) is not an error.
	MarkSent(ctx context.Context, ids []string) error
	// ReleaseEvents ends the lease of claimed events that were not
	// published, so that the next claim returns them at once.
	ReleaseEvents(ctx context.Context, ids []string) error
	// SweepSent deletes up to limit events that were marked sent more than
	// retention ago and reports how many it deleted.
	SweepSent(ctx context.Context, retention time.Duration, limit int) (int, error)
}

// MaxEventField is the longest outbox event id, topic, key or header name,
// in bytes (the column width of the SQL stores).
const MaxEventField = 255

// PrepareEvents checks events before they are written and returns copies
// in which an empty ID is replaced by a random one. Every OutboxWriter calls
// it: an event needs a topic, and its id, topic, key and header names must
// fit MaxEventField bytes (ids must also be unique in the table, which the
// store enforces).
func PrepareEvents(events []OutboxEvent) ([]OutboxEvent, error) {
	out := make([]OutboxEvent, len(events))
	for i, ev := range events {
		if ev.ID == "" {
			ev.ID = newEventID()
		}
		switch {
		case len(ev.ID) > MaxEventField:
			return nil, fmt.Errorf("idempotency: outbox event id must be at most %d bytes, got %d", MaxEventField, len(ev.ID))
		case ev.Topic == "" || len(ev.Topic) > MaxEventField:
			return nil, fmt.Errorf("idempotency: outbox event %q: topic must be 1 to %d bytes, got %d", ev.ID, MaxEventField, len(ev.Topic))
		case len(ev.Key) > MaxEventField:
			return nil, fmt.Errorf("idempotency: outbox event %q: key must be at most %d bytes, got %d", ev.ID, MaxEventField, len(ev.Key))
		}
		for name := range ev.Headers {
			if name == "" || len(name) > MaxEventField {
				return nil, fmt.Errorf("idempotency: outbox event %q: header names must be 1 to %d bytes, got %d", ev.ID, MaxEventField, len(name))
			}
		}
		ev.Payload = append([]byte(nil), ev.Payload...)
		ev.Headers = maps.Clone(ev.Headers)
		out[i] = ev
	}
	return out, nil
}
