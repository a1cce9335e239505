package harness

import (
	"context"
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
