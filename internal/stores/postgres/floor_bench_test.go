package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkHTTPFloor measures, through BenchmarkHTTP's server and clients,
// handlers that send the fewest statements a first request could, with
// the store's own claim (Acquire) and completion (Complete) and no
// wrapper, no read first, no advisory lock: what any design sending them
// could reach against the bare INSERT handler (docs/performance-log.md).
//
//   - floor-nontx: claim, the handler's INSERT, completion, each committed
//     on its own (3 round trips, 3 commits): the non-transactional floor.
//
//   - floor-tx: BEGIN, claim, INSERT, completion, COMMIT (5 round trips).
//
//   - floor-tx-batched: BEGIN with the claim, the INSERT, the completion
//     with the COMMIT (3 round trips): the fewest a transactional design
//     can send with the handler running between claim and completion.
//
//   - floor-tx-1rt: all five in one round trip, which no implementation
//     can send (the handler runs between the claim and the completion).
//
//   - store-nontx, store-tx: the store's own Claim, INSERT, Complete and
//     BeginClaim, INSERT in its transaction, Complete, Commit (TestRoundTrips'
//     round trips), with no wrapper around them.
//
//   - store-tx-batched: store-tx with BEGIN sent with the claim (4 round
//     trips: the read, BEGIN+ClaimTx, INSERT, CompleteTx+COMMIT), the
//     fewest the store could send while a replay stays one read.
//
// newkey and newkey-tx, BenchmarkHTTP's requests through the wrapper, run
// in the same rounds.
//
//	go test ./internal/stores/postgres -run '^$' -bench HTTPFloor -benchtime 1x -count 3
func BenchmarkHTTPFloor(b *testing.B) {
	db := newTestDB(b)
	pool := db.pool(b, func(c *pgxpool.Config) { c.MaxConns = harness.Clients })
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE plain (id text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	principal := make([]byte, 32)
	fingerprint := []byte(strings.Repeat("f", 32))
	headers := []byte("Content-Type: application/json")
	const leaseMs, ttlMs = int64(60000), int64(86400000)
	acquireArgs := func(key string) []any {
		return []any{"createCharge", principal, key, fingerprint, int32(2), leaseMs, ttlMs}
	}
	completeArgs := func(key string, body []byte, epoch int64) []any {
		return []any{int32(201), headers, body, false, ttlMs, "createCharge", principal, key, epoch}
	}
	// The completion in the claim's transaction needs no epoch: the
	// transaction holds the row.
	completeAny := strings.Replace(complete, "AND epoch = $9", "AND epoch = epoch", 1)
	if completeAny == complete {
		b.Fatal("Complete has no epoch condition to drop")
	}
	completed := func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return errors.New("the completion matched no record")
		}
		return nil
	}
	inConn := func(ctx context.Context, f func(c *pgxpool.Conn) error) error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		if err := f(c); err != nil {
			_, _ = c.Exec(context.WithoutCancel(ctx), "rollback")
			return err
		}
		return nil
	}
	st, err := NewStore(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	claimReq := func(key string) idemrt.ClaimRequest {
		return idemrt.ClaimRequest{
			RecordKey:   idemrt.RecordKey{Scope: "createCharge", Key: key},
			Fingerprint: [32]byte{1}, FingerprintVersion: 2,
			Lease: time.Minute, TTL: 24 * time.Hour,
		}
	}
	completion := func(key string, body []byte, epoch int64) idemrt.Completion {
		return idemrt.Completion{
			RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: key}, Epoch: epoch, TTL: 24 * time.Hour,
			Response: &idemrt.SavedResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: body},
		}
	}
	harness.HTTPFloors(b, harness.HTTPBackend{
		Store:  st,
		Insert: insertPlain(pool),
	}, []harness.HTTPFloor{
		{Name: "floor-nontx", Do: func(ctx context.Context, key, id string, body []byte) error {
			var epoch int64
			if err := pool.QueryRow(ctx, acquire, acquireArgs(key)...).Scan(&epoch); err != nil {
				return err
			}
			if _, err := pool.Exec(ctx, plainInsert, id, body); err != nil {
				return err
			}
			tag, err := pool.Exec(ctx, complete, completeArgs(key, body, epoch)...)
			if err != nil {
				return err
			}
			return completed(tag)
		}},
		{Name: "floor-tx", Do: func(ctx context.Context, key, id string, body []byte) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			var epoch int64
			if err := tx.QueryRow(ctx, acquire, acquireArgs(key)...).Scan(&epoch); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, plainInsert, id, body); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, complete, completeArgs(key, body, epoch)...)
			if err != nil {
				return err
			}
			if err := completed(tag); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
		{Name: "floor-tx-batched", Do: func(ctx context.Context, key, id string, body []byte) error {
			return inConn(ctx, func(c *pgxpool.Conn) error {
				b := &pgx.Batch{}
				b.Queue("begin")
				b.Queue(acquire, acquireArgs(key)...)
				br := c.SendBatch(ctx, b)
				_, err := br.Exec()
				var epoch int64
				if err == nil {
					err = br.QueryRow().Scan(&epoch)
				}
				if cerr := br.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				if _, err := c.Exec(ctx, plainInsert, id, body); err != nil {
					return err
				}
				b = &pgx.Batch{}
				b.Queue(complete, completeArgs(key, body, epoch)...)
				b.Queue("commit")
				return finish(c.SendBatch(ctx, b), 0, completed)
			})
		}},
		{Name: "floor-tx-1rt", Do: func(ctx context.Context, key, id string, body []byte) error {
			return inConn(ctx, func(c *pgxpool.Conn) error {
				b := &pgx.Batch{}
				b.Queue("begin")
				b.Queue(acquire, acquireArgs(key)...)
				b.Queue(plainInsert, id, body)
				b.Queue(completeAny, completeArgs(key, body, 0)[:8]...)
				b.Queue("commit")
				return finish(c.SendBatch(ctx, b), 3, completed)
			})
		}},
		{Name: "store-tx-batched", Do: func(ctx context.Context, key, id string, body []byte) error {
			rk := idemrt.RecordKey{Scope: "createCharge", Key: key}
			if err := pool.QueryRow(ctx, lookup, "createCharge", rk.PrincipalHash[:], key).Scan(); !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("lookup: %v", err)
			}
			return inConn(ctx, func(c *pgxpool.Conn) error {
				b := &pgx.Batch{}
				b.Queue("begin")
				b.Queue(claimTx, lockKey(rk), leaseMs, "createCharge", rk.PrincipalHash[:], key, fingerprint, int32(2), ttlMs)
				br := c.SendBatch(ctx, b)
				_, err := br.Exec()
				var row sqlcClaimTxRow
				if err == nil {
					err = br.QueryRow().Scan(&row.Locked, &row.IdleTimeout, &row.Epoch)
				}
				if cerr := br.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				if !row.Locked || !row.Epoch.Valid {
					return errors.New("claim: not acquired")
				}
				if _, err := c.Exec(ctx, plainInsert, id, body); err != nil {
					return err
				}
				b = &pgx.Batch{}
				b.Queue(completeTx, completeArgs(key, body, row.Epoch.Int64)...)
				b.Queue("commit")
				return finish(c.SendBatch(ctx, b), 0, func(pgconn.CommandTag) error { return nil })
			})
		}},
		{Name: "store-nontx", Do: func(ctx context.Context, key, id string, body []byte) error {
			res, err := st.Claim(ctx, claimReq(key))
			if err != nil {
				return err
			}
			if res.State != idemrt.Acquired {
				return fmt.Errorf("claim: state %v", res.State)
			}
			if _, err := pool.Exec(ctx, plainInsert, id, body); err != nil {
				return err
			}
			return st.Complete(ctx, completion(key, body, res.Epoch))
		}},
		{Name: "store-tx", Do: func(ctx context.Context, key, id string, body []byte) error {
			tx, res, err := st.BeginClaim(ctx, claimReq(key))
			if err != nil {
				return err
			}
			if res.State != idemrt.Acquired {
				return fmt.Errorf("claim: state %v", res.State)
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if _, err := tx.Handle().(pgx.Tx).Exec(ctx, plainInsert, id, body); err != nil {
				return err
			}
			if err := tx.Complete(ctx, completion(key, body, res.Epoch)); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
	})
}

// finish reads a batch ending in a completion and COMMIT: before
// statements, then the completion (checked by check), then the COMMIT.
func finish(br pgx.BatchResults, before int, check func(pgconn.CommandTag) error) error {
	var err error
	for range before {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil {
			err = check(tag)
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = errors.New("the server rolled the transaction back")
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}
