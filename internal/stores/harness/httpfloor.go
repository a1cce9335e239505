package harness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// HTTPFloors measures floors against the bare INSERT handler of
// HTTPRatios (hb.Insert), through the same real net/http server and 16
// clients, in interleaved 250 ms slices (8 rounds per b.N), together with
// HTTPRatios' newkey and newkey-tx (that handler through idemrt.Wrap over
// hb.Store), so that the wrapper, the store and the floors are compared in
// one run. floors come after StoreFloors(hb). Each ratio is reported as
// name/insert, with the load average before and after.
func HTTPFloors(b *testing.B, hb HTTPBackend, floors []HTTPFloor) {
	floors = append(StoreFloors(hb), floors...)
	only := []string{"insert", "newkey", "newkey-tx"}
	for _, f := range floors {
		only = append(only, f.Name)
	}
	httpBench(b, hb, floors, only)
}

// StoreFloors are the floors any store has, through its own methods with
// no wrapper around them:
//
//   - store-nontx: the store's Claim, the handler's INSERT, Complete (what
//     newkey sends, without the wrapper);
//   - store-tx: the store's BeginClaim, the INSERT in its transaction,
//     Complete and Commit (what newkey-tx sends, without the wrapper);
//   - insert-tx: the bare INSERT in the store's transaction shape
//     (BeginTx, INSERT, Commit): what a transactional handler pays with no
//     key at all.
//
// The last two need hb.InsertIn and a store that implements
// idemrt.ClaimTxStore (store-tx).
func StoreFloors(hb HTTPBackend) []HTTPFloor {
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
			Response: &idemrt.SavedResponse{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body},
		}
	}
	st := hb.Store
	floors := []HTTPFloor{{Name: "store-nontx", Do: func(ctx context.Context, key, id string, body []byte) error {
		res, err := st.Claim(ctx, claimReq(key))
		if err != nil {
			return err
		}
		if res.State != idemrt.Acquired {
			return fmt.Errorf("claim: state %v", res.State)
		}
		if err := hb.Insert(ctx, id, body); err != nil {
			return err
		}
		return st.Complete(ctx, completion(key, body, res.Epoch))
	}}}
	if hb.InsertIn == nil {
		return floors
	}
	if cst, ok := st.(idemrt.ClaimTxStore); ok {
		floors = append(floors, HTTPFloor{Name: "store-tx", Do: func(ctx context.Context, key, id string, body []byte) error {
			tx, res, err := cst.BeginClaim(ctx, claimReq(key))
			if err != nil {
				return err
			}
			if res.State != idemrt.Acquired {
				return fmt.Errorf("claim: state %v", res.State)
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if err := hb.InsertIn(ctx, tx, id, body); err != nil {
				return err
			}
			if err := tx.Complete(ctx, completion(key, body, res.Epoch)); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}})
	}
	return append(floors, HTTPFloor{Name: "insert-tx", Do: func(ctx context.Context, _, id string, body []byte) error {
		tx, err := st.BeginTx(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if err := hb.InsertIn(ctx, tx, id, body); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}})
}

// SQLFloorSteps are a database/sql store's own claim and completion
// statements (its generated queries, no read first), each run in tx when
// tx is not nil and on its own otherwise.
type SQLFloorSteps struct {
	Claim    func(ctx context.Context, tx *sql.Tx, key string) (epoch int64, err error)
	Complete func(ctx context.Context, tx *sql.Tx, key string, body []byte, epoch int64) error
}

// SQLFloors are the fewest statements a first request could send on a
// database/sql store, with no wrapper and no read first: what any design
// sending them could reach against hb's bare INSERT handler.
//
//   - floor-nontx: the claim, the handler's INSERT, the completion, each
//     committed on its own (3 statements, 3 commits);
//   - floor-tx (with hb.InsertIn): the store's transaction (BeginTx), the
//     claim, the INSERT, the completion, COMMIT: one commit.
func SQLFloors(hb HTTPBackend, s SQLFloorSteps) []HTTPFloor {
	floors := []HTTPFloor{{Name: "floor-nontx", Do: func(ctx context.Context, key, id string, body []byte) error {
		epoch, err := s.Claim(ctx, nil, key)
		if err != nil {
			return err
		}
		if err := hb.Insert(ctx, id, body); err != nil {
			return err
		}
		return s.Complete(ctx, nil, key, body, epoch)
	}}}
	if hb.InsertIn == nil {
		return floors
	}
	return append(floors, HTTPFloor{Name: "floor-tx", Do: func(ctx context.Context, key, id string, body []byte) error {
		tx, err := hb.Store.BeginTx(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		sqlTx, ok := tx.Handle().(*sql.Tx)
		if !ok {
			return errors.New("the store's transaction is not a *sql.Tx")
		}
		epoch, err := s.Claim(ctx, sqlTx, key)
		if err != nil {
			return err
		}
		if err := hb.InsertIn(ctx, tx, id, body); err != nil {
			return err
		}
		if err := s.Complete(ctx, sqlTx, key, body, epoch); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}})
}
