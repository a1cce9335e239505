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

// BatchSize is the integer type sqlc gives a statement's LIMIT parameter:
// int32 for PostgreSQL and MySQL, int64 for SQLite. The helpers that take
// a store's statements are generic in it, so that a generated store passes
// its sqlc methods as they are.
type BatchSize interface{ ~int32 | ~int64 }

// Sweep deletes up to limit expired idempotency records (keys) and, with
// what is left of limit, processed message ids older than retention
// (processed), so that idemrt.RunSweeper's loop (call again while a call
// deletes limit rows) empties both tables. keys and processed return the
// rows they deleted. A retention of zero or less keeps processed ids for
// ever: processed is not called. limit is bounded by MaxSweep; zero or
// less deletes nothing.
func Sweep[N BatchSize](ctx context.Context, limit int, retention time.Duration,
	keys func(ctx context.Context, limit N) (int64, error),
	processed func(ctx context.Context, limit N, retention time.Duration) (int64, error),
) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	limit = min(limit, MaxSweep)
	n, err := keys(ctx, N(limit))
	if err != nil {
		return 0, fmt.Errorf("idempotency store: sweep: %w", err)
	}
	if int(n) >= limit || retention <= 0 {
		return int(n), nil
	}
	m, err := processed(ctx, N(limit-int(n)), retention)
	if err != nil {
		return int(n), fmt.Errorf("idempotency store: sweep processed ids: %w", err)
	}
	return int(n + m), nil
}
