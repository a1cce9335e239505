package storekit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// The outbox's helpers that every SQL store shares (the Redis store has no
// outbox).

// EncodeEventHeaders encodes an outbox event's headers as a JSON object
// (keys sorted), or as nothing when there are none.
func EncodeEventHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return []byte{}, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("idempotency store: encoding event headers: %w", err)
	}
	return b, nil
}

// DecodeEventHeaders decodes what EncodeEventHeaders wrote: nothing is no
// headers (nil).
func DecodeEventHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("idempotency store: decoding event headers: %w", err)
	}
	return h, nil
}

// MaxClaimEvents bounds the events one ClaimEvents call takes.
const MaxClaimEvents = 1 << 20

// CheckClaimEvents checks the arguments of an outbox store's ClaimEvents
// and bounds limit by MaxClaimEvents.
func CheckClaimEvents(limit int, lease time.Duration) (int, error) {
	if limit <= 0 || lease <= 0 {
		return 0, fmt.Errorf("idempotency store: claim events: limit and lease must be positive, got %d and %v", limit, lease)
	}
	return min(limit, MaxClaimEvents), nil
}

// Event is an outbox event as a store's claim statement returns it: its
// headers are still encoded (EncodeEventHeaders), in EncodedHeaders.
type Event struct {
	Seq            int64 // the event's place in the table's order
	EncodedHeaders []byte
	idemrt.OutboxEvent
}

// ClaimEvents is an outbox store's ClaimEvents: it checks limit and lease
// (CheckClaimEvents), runs the store's claim of up to limit events for
// lease, and returns them in the table's order with their headers
// decoded; event reads one row of claim's.
func ClaimEvents[N BatchSize, R any](ctx context.Context, limit int, lease time.Duration,
	claim func(ctx context.Context, limit N, lease time.Duration) ([]R, error),
	event func(R) Event,
) ([]idemrt.OutboxEvent, error) {
	limit, err := CheckClaimEvents(limit, lease)
	if err != nil {
		return nil, err
	}
	rows, err := claim(ctx, N(limit), lease)
	if err != nil {
		return nil, fmt.Errorf("idempotency store: claim events: %w", err)
	}
	claimed := make([]Event, len(rows))
	for i, r := range rows {
		claimed[i] = event(r)
	}
	slices.SortFunc(claimed, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	evs := make([]idemrt.OutboxEvent, len(claimed))
	for i, e := range claimed {
		evs[i] = e.OutboxEvent
		if evs[i].Headers, err = DecodeEventHeaders(e.EncodedHeaders); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// MarkSent is an outbox store's MarkSent: mark runs the store's statement
// for ids, unless there are none.
func MarkSent(ctx context.Context, ids []string, mark func(ctx context.Context, ids []string) (int64, error)) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := mark(ctx, ids); err != nil {
		return fmt.Errorf("idempotency store: mark events sent: %w", err)
	}
	return nil
}

// ReleaseEvents is an outbox store's ReleaseEvents: release runs the
// store's statement for ids, unless there are none.
func ReleaseEvents(ctx context.Context, ids []string, release func(ctx context.Context, ids []string) (int64, error)) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := release(ctx, ids); err != nil {
		return fmt.Errorf("idempotency store: release events: %w", err)
	}
	return nil
}

// SweepSent is an outbox store's SweepSent: sweep deletes up to limit
// (bounded by MaxSweep) events sent longer than retention ago and returns
// how many it deleted. A limit of zero or less deletes nothing.
func SweepSent[N BatchSize](ctx context.Context, retention time.Duration, limit int,
	sweep func(ctx context.Context, limit N, retention time.Duration) (int64, error),
) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	n, err := sweep(ctx, N(min(limit, MaxSweep)), retention)
	if err != nil {
		return 0, fmt.Errorf("idempotency store: sweep sent events: %w", err)
	}
	return int(n), nil
}

// NonNil returns b, or an empty slice for nil (the columns are NOT NULL).
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
