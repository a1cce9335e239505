package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestClaimTxIdleBoundedByLease: a transaction that holds a claim and goes
// idle past its lease (its client vanished without closing the
// connection) is ended by the server (idle_in_transaction_session_timeout,
// set for the transaction by the claim): it cannot commit, and the key is
// free again.
func TestClaimTxIdleBoundedByLease(t *testing.T) {
	st := newTestDB(t).store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "idle")}
	req := idemrt.ClaimRequest{RecordKey: k, Lease: 300 * time.Millisecond, TTL: time.Hour}
	tx, res, err := st.BeginClaim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("BeginClaim: %+v, %v", res, err)
	}
	time.Sleep(time.Second)
	err = tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, Response: &idemrt.SavedResponse{Status: 201}, TTL: time.Hour})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err == nil {
		t.Fatal("a transaction idle past its lease completed and committed")
	}
	tx.Rollback(ctx)
	req.Lease = time.Minute
	got, err := st.Claim(ctx, req)
	if err != nil || got.State != idemrt.Acquired || got.TakenOver {
		t.Fatalf("claim after the server ended the transaction: %+v, %v; want a fresh claim", got, err)
	}
}

// TestClaimTxDuplicateElsewhereGetsLeaseLeft: a duplicate of a one-commit
// attempt held by another process (here another store on another pool)
// cannot see the uncommitted record; it is told InProgress with the
// holder's remaining lease (from the advisory lock's holder), so that
// Retry-After reflects it (it was 0, answered Retry-After: 1, while 8 s
// were left).
func TestClaimTxDuplicateElsewhereGetsLeaseLeft(t *testing.T) {
	db := newTestDB(t)
	a, b := db.store(t), db.store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "elsewhere")}
	req := idemrt.ClaimRequest{RecordKey: k, Lease: 10 * time.Second, TTL: time.Hour}
	tx, res, err := a.BeginClaim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("BeginClaim: %+v, %v", res, err)
	}
	defer tx.Rollback(ctx)
	time.Sleep(1100 * time.Millisecond)
	_, dup, err := b.BeginClaim(ctx, req)
	if err != nil || dup.State != idemrt.InProgress {
		t.Fatalf("duplicate: %+v, %v; want InProgress", dup, err)
	}
	if dup.LeaseRemaining < 8*time.Second || dup.LeaseRemaining > 9*time.Second {
		t.Errorf("duplicate: LeaseRemaining %v while about 8.9 s are left", dup.LeaseRemaining)
	}
}
