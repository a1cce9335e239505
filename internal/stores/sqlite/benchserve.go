package sqlite

// This file is not rendered by idemgen: it holds the HTTP benchmarks'
// SQLite floors, shared by BenchmarkHTTPFloor and the external load
// generator (internal/stores/harness/cmd/loadbench).

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// BenchFloors are handlers that send the fewest statements a first
// request could, with the store's own claim (Acquire) and completion
// (Complete), prepared once on conn (the store's generated queries), and
// no wrapper and no read first:
// what any design sending them could reach against hb's bare INSERT
// handler.
//
//   - floor-nontx: claim, the handler's INSERT, completion, each committed
//     on its own (3 statements, 3 commits).
//
//   - floor-tx: the store's transaction (BeginTx: its write turn, then
//     BEGIN IMMEDIATE), claim, INSERT, completion, COMMIT: one commit.
//
// harness.StoreFloors adds the store's own paths without the wrapper. The
// returned function closes the statements.
func BenchFloors(ctx context.Context, conn *sql.DB, hb harness.HTTPBackend) ([]harness.HTTPFloor, func(), error) {
	q, err := sqlcPrepare(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	principal := make([]byte, 32)
	fingerprint := []byte(strings.Repeat("f", 32))
	headers := []byte("Content-Type: application/json")
	const leaseMs, ttlMs = int64(60000), int64(86400000)
	claim := func(ctx context.Context, q *sqlcQueries, key string) (int64, error) {
		return q.Acquire(ctx, sqlcAcquireParams{
			Scope: "createCharge", Principal: principal, IdemKey: key,
			Fingerprint: fingerprint, FingerprintVersion: 2, LeaseMs: leaseMs, TtlMs: ttlMs,
		})
	}
	completeIt := func(ctx context.Context, q *sqlcQueries, key string, body []byte, epoch int64) error {
		n, err := q.Complete(ctx, sqlcCompleteParams{
			Status: 201, Headers: headers, Body: body, TtlMs: ttlMs,
			Scope: "createCharge", Principal: principal, IdemKey: key, Epoch: epoch,
		})
		if err == nil && n != 1 {
			err = fmt.Errorf("the completion matched %d records", n)
		}
		return err
	}
	on := func(tx *sql.Tx) *sqlcQueries {
		if tx == nil {
			return q
		}
		return q.WithTx(tx)
	}
	floors := harness.SQLFloors(hb, harness.SQLFloorSteps{
		Claim: func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			return claim(ctx, on(tx), key)
		},
		Complete: func(ctx context.Context, tx *sql.Tx, key string, body []byte, epoch int64) error {
			return completeIt(ctx, on(tx), key, body, epoch)
		},
	})
	return floors, func() { q.Close() }, nil
}
