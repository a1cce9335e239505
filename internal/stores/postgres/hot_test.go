package postgres

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
)

// TestCompletionIsHeapOnly: a completion within the lease changes no
// indexed column (sweep_at stays where the claim put it, lease + ttl
// ahead), so PostgreSQL updates the row heap-only (HOT), without new index
// entries; a completion after the lease moves sweep_at to the new expiry.
// Either way sweep_at is never before expires_at, so the sweeper deletes
// only expired records. The counters (pg_stat_get_xact_*) are read in the
// transaction that completes, before and after the completion.
func TestCompletionIsHeapOnly(t *testing.T) {
	db := newTestDB(t)
	st := db.store(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		lease    time.Duration
		wait     time.Duration
		wantHOT  bool
		wantMove bool
	}{
		{"within the lease", time.Minute, 0, true, false},
		{"after the lease", 200 * time.Millisecond, 300 * time.Millisecond, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = time.Hour
			k := idemrt.RecordKey{Scope: "hot", Key: harness.UniqueKey(t, "hot")}
			res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: tc.lease, TTL: ttl})
			if err != nil || res.State != idemrt.Acquired {
				t.Fatalf("claim: %+v, %v", res, err)
			}
			var claimedSweep time.Time
			if err := db.pool(t, nil).QueryRow(ctx, "SELECT sweep_at FROM idempotency_keys WHERE idem_key = $1", k.Key).Scan(&claimedSweep); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.wait)
			tx, err := st.BeginTx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
			pgtx := tx.Handle().(pgx.Tx)
			counts := func() (updated, hot int64) {
				t.Helper()
				if err := pgtx.QueryRow(ctx,
					`SELECT pg_stat_get_xact_tuples_updated('idempotency_keys'::regclass),
					        pg_stat_get_xact_tuples_hot_updated('idempotency_keys'::regclass)`).Scan(&updated, &hot); err != nil {
					t.Fatal(err)
				}
				return updated, hot
			}
			// The counters hold what this connection has not yet reported
			// to the statistics: count the completion as a difference.
			updated0, hot0 := counts()
			c := idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: ttl, Response: &idemrt.SavedResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_1"}`)}}
			if err := tx.Complete(ctx, c); err != nil {
				t.Fatalf("complete: %v", err)
			}
			updated1, hot1 := counts()
			updated, hot := updated1-updated0, hot1-hot0
			var expires, sweep time.Time
			if err := pgtx.QueryRow(ctx, "SELECT expires_at, sweep_at FROM idempotency_keys WHERE idem_key = $1", k.Key).Scan(&expires, &sweep); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if updated != 1 {
				t.Fatalf("the completion updated %d rows, want 1", updated)
			}
			if gotHOT := hot == 1; gotHOT != tc.wantHOT {
				t.Errorf("heap-only update: %v, want %v", gotHOT, tc.wantHOT)
			}
			if sweep.Before(expires) {
				t.Errorf("sweep_at %v is before expires_at %v: the sweeper could delete a live record", sweep, expires)
			}
			if moved := !sweep.Equal(claimedSweep); moved != tc.wantMove {
				t.Errorf("sweep_at moved from %v to %v: %v, want %v", claimedSweep, sweep, moved, tc.wantMove)
			}
		})
	}
}
