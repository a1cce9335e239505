package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
)

// TestTransactionalCompletionTime: a completion inside the handler's
// transaction counts the TTL from the completion, not from the start of
// the transaction (which is what now() would give): after a handler that
// runs 1s, a 2s TTL leaves about 2s, not about 1s. The same holds for the
// time MarkProcessed stores.
func TestTransactionalCompletionTime(t *testing.T) {
	db := newTestDB(t)
	st := db.store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "txtime", Key: harness.UniqueKey(t, "txtime")}
	res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	pgtx := tx.Handle().(pgx.Tx)
	if _, err := pgtx.Exec(ctx, "SELECT 1"); err != nil { // the transaction starts here
		t.Fatal(err)
	}
	const handler, ttl = time.Second, 2 * time.Second
	time.Sleep(handler)
	first, err := MarkProcessed(ctx, pgtx, "txtime", "m1")
	if err != nil || !first {
		t.Fatalf("MarkProcessed: %v, %v", first, err)
	}
	if err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: ttl}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	var leftMs, leaseMs, processedMs float64
	if err := pgtx.QueryRow(ctx,
		`SELECT extract(epoch FROM k.expires_at - statement_timestamp()) * 1000,
		        extract(epoch FROM statement_timestamp() - k.lease_until) * 1000,
		        extract(epoch FROM p.processed_at - now()) * 1000
		 FROM idempotency_keys k, idempotency_keys_processed p
		 WHERE k.idem_key = $1 AND p.message_id = 'm1'`, k.Key).Scan(&leftMs, &leaseMs, &processedMs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	left := time.Duration(leftMs * float64(time.Millisecond))
	if left <= ttl-handler/2 || left > ttl {
		t.Errorf("a completion after a %v handler expires %v after it, want about %v (not %v: the TTL counted from the transaction's start)", handler, left, ttl, ttl-handler)
	}
	if lease := time.Duration(leaseMs * float64(time.Millisecond)); lease < 0 || lease > handler/2 {
		t.Errorf("lease_until is %v before the completion, want about 0", lease)
	}
	if processed := time.Duration(processedMs * float64(time.Millisecond)); processed < handler {
		t.Errorf("processed_at is %v after the transaction's start, want at least %v (the statement's time)", processed, handler)
	}
	got, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
	if err != nil || got.State != idemrt.Completed {
		t.Fatalf("claim after the completion: %+v, %v; want completed", got, err)
	}
}
