package sqlite

// This file is not rendered by idemgen: it holds the HTTP benchmarks'
// SQLite floors, shared by BenchmarkHTTPFloor and the external load
// generator (internal/stores/harness/cmd/loadbench).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// BenchFloors are handlers that send the fewest statements a first
// request could, with the store's own claim (Acquire) and completion
// (Complete), prepared once on conn, and no wrapper and no read first:
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
	acq, err := conn.PrepareContext(ctx, acquire)
	if err != nil {
		return nil, nil, err
	}
	cmp, err := conn.PrepareContext(ctx, complete)
	if err != nil {
		acq.Close()
		return nil, nil, err
	}
	principal := make([]byte, 32)
	fingerprint := []byte(strings.Repeat("f", 32))
	headers := []byte("Content-Type: application/json")
	const leaseMs, ttlMs = int64(60000), int64(86400000)
	claim := func(ctx context.Context, s *sql.Stmt, key string) (epoch int64, err error) {
		err = s.QueryRowContext(ctx, "createCharge", principal, key, fingerprint, int64(2), leaseMs, ttlMs).Scan(&epoch)
		return epoch, err
	}
	completeIt := func(ctx context.Context, s *sql.Stmt, key string, body []byte, epoch int64) error {
		res, err := s.ExecContext(ctx, int64(201), headers, body, false, ttlMs, "createCharge", principal, key, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("the completion matched %d records (%v)", n, err)
		}
		return nil
	}
	floors := []harness.HTTPFloor{{Name: "floor-nontx", Do: func(ctx context.Context, key, id string, body []byte) error {
		epoch, err := claim(ctx, acq, key)
		if err != nil {
			return err
		}
		if err := hb.Insert(ctx, id, body); err != nil {
			return err
		}
		return completeIt(ctx, cmp, key, body, epoch)
	}}}
	if hb.InsertIn != nil {
		floors = append(floors, harness.HTTPFloor{Name: "floor-tx", Do: func(ctx context.Context, key, id string, body []byte) error {
			tx, err := hb.Store.BeginTx(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			sqlTx, ok := tx.Handle().(*sql.Tx)
			if !ok {
				return errors.New("the store's transaction is not a *sql.Tx")
			}
			epoch, err := claim(ctx, sqlTx.StmtContext(ctx, acq), key)
			if err != nil {
				return err
			}
			if err := hb.InsertIn(ctx, tx, id, body); err != nil {
				return err
			}
			if err := completeIt(ctx, sqlTx.StmtContext(ctx, cmp), key, body, epoch); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}})
	}
	return floors, func() { acq.Close(); cmp.Close() }, nil
}
