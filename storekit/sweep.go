package storekit

import (
	"context"
	"fmt"
	"time"
)

// DefaultProcessedRetention is how long a message consumer's processed ids
// are kept unless a store's ProcessedRetention option says otherwise: 14
// days, the longest that Amazon SQS keeps a message (Kafka's default
// retention is 7 days). A redelivery older than the retention runs again
// once the sweeper has deleted its id.
const DefaultProcessedRetention = 14 * 24 * time.Hour

// MaxSweep bounds the rows one Sweep call deletes.
const MaxSweep = 1 << 30

// Sweep deletes up to limit expired idempotency records (keys) and, with
// what is left of limit, processed message ids older than retention
// (processed), so that idemrt.RunSweeper's loop (call again while a call
// deletes limit rows) empties both tables. A retention of zero or less
// keeps processed ids for ever: processed is not called. limit is bounded
// by MaxSweep; zero or less deletes nothing.
func Sweep(ctx context.Context, limit int, retention time.Duration,
	keys func(ctx context.Context, limit int) (int, error),
	processed func(ctx context.Context, limit int, retention time.Duration) (int, error),
) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	limit = min(limit, MaxSweep)
	n, err := keys(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("idempotency store: sweep: %w", err)
	}
	if n >= limit || retention <= 0 {
		return n, nil
	}
	m, err := processed(ctx, limit-n, retention)
	if err != nil {
		return n, fmt.Errorf("idempotency store: sweep processed ids: %w", err)
	}
	return n + m, nil
}
