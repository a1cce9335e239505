package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestClaimTxDuplicateElsewhereGetsLeaseLeft: a duplicate of a one-commit
// attempt held by another store (another process) waits on the holder's row
// lock and gets InProgress with what is left of the lease, bounded from
// above by the lease less its own wait, not 0 (which the engine answers as
// Retry-After: 1 while seconds of the lease are left).
func TestClaimTxDuplicateElsewhereGetsLeaseLeft(t *testing.T) {
	db := newTestDB(t)
	a, b := db.store(t), db.store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "elsewhere")}
	const lease = 10 * time.Second
	req := idemrt.ClaimRequest{RecordKey: k, Lease: lease, TTL: time.Hour}
	held := time.Now()
	tx, res, err := a.BeginClaim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("BeginClaim: %+v, %v", res, err)
	}
	defer tx.Rollback(ctx)
	time.Sleep(1100 * time.Millisecond)
	waited := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	_, dup, err := b.BeginClaim(wctx, req)
	done := time.Now()
	if err != nil || dup.State != idemrt.InProgress {
		t.Fatalf("duplicate: %+v, %v; want InProgress", dup, err)
	}
	// The holder's lease ends at most lease after it was claimed (held) and
	// the bound is lease after this claim began to wait.
	left, bound := lease-done.Sub(held), lease-done.Sub(waited)
	if dup.LeaseRemaining < left-50*time.Millisecond || dup.LeaseRemaining > bound+50*time.Millisecond {
		t.Errorf("duplicate: LeaseRemaining %v; the lease has %v left and the bound is %v", dup.LeaseRemaining, left, bound)
	}
}
