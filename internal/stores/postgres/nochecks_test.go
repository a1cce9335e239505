package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5/pgconn"
)

// earlierChecks are the CHECK constraints of the key table as versions
// before this one created it (PostgreSQL's own names for them).
var earlierChecks = []string{
	"ADD CONSTRAINT idempotency_keys_principal_check CHECK (octet_length(principal) = 32)",
	"ADD CONSTRAINT idempotency_keys_fingerprint_check CHECK (octet_length(fingerprint) = 32)",
	"ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN (1, 2, 3))",
}

// TestKeyTableWithoutChecks: the key table has no CHECK constraints (the
// server re-reads and plans them on every statement that writes the
// table); the claims' functions, the only writers of the digests, refuse
// one that is not 32 bytes with the constraint's SQLSTATE (23514); and a
// table that an earlier version created, with its three CHECKs, keeps
// working with this version's statements in both modes.
func TestKeyTableWithoutChecks(t *testing.T) {
	for _, deployed := range []bool{false, true} {
		name := "new"
		if deployed {
			name = "deployed-with-checks"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := newTestDB(t)
			pool := db.pool(t, nil)
			want := 0
			if deployed {
				for _, c := range earlierChecks {
					if _, err := pool.Exec(ctx, "ALTER TABLE idempotency_keys "+c); err != nil {
						t.Fatal(err)
					}
				}
				want = len(earlierChecks)
			}
			var checks int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'idempotency_keys'::regclass AND contype = 'c'").Scan(&checks); err != nil {
				t.Fatal(err)
			}
			if checks != want {
				t.Fatalf("the key table has %d CHECK constraints; want %d", checks, want)
			}

			good, short := make([]byte, 32), make([]byte, 31)
			for _, c := range []struct {
				what, sql             string
				principal, fingerprnt []byte
			}{
				{"acquire, short principal", "SELECT idempotency_keys_acquire('s', $1, 'k1', $2, 1, 1000, 1000)", short, good},
				{"acquire, short fingerprint", "SELECT idempotency_keys_acquire('s', $1, 'k2', $2, 1, 1000, 1000)", good, short},
				{"claim_tx, short principal", "SELECT idempotency_keys_claim_tx('t', 's', $1, 'k3', 3, 1000, $2, 1, 1000)", short, good},
				{"claim_tx, short fingerprint", "SELECT idempotency_keys_claim_tx('t', 's', $1, 'k4', 4, 1000, $2, 1, 1000)", good, short},
			} {
				_, err := pool.Exec(ctx, c.sql, c.principal, c.fingerprnt)
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
					t.Errorf("%s: %v; want SQLSTATE 23514", c.what, err)
				}
			}
			var rows int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&rows); err != nil || rows != 0 {
				t.Fatalf("refused claims left %d rows (%v)", rows, err)
			}

			st := db.store(t)
			resp := &idemrt.SavedResponse{Status: 201, Body: []byte(`{"id":1}`)}
			for _, tx := range []bool{false, true} {
				k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "nochecks")}
				req := idemrt.ClaimRequest{RecordKey: k, Fingerprint: [32]byte{1}, FingerprintVersion: 2, Lease: 10 * time.Second, TTL: time.Hour}
				done := idemrt.Completion{RecordKey: k, Response: resp, TTL: time.Hour}
				var first idemrt.ClaimResult
				var err error
				if tx {
					var t0 idemrt.Tx
					t0, first, err = st.BeginClaim(ctx, req)
					if err == nil && first.State == idemrt.Acquired {
						done.Epoch = first.Epoch
						if err = t0.Complete(ctx, done); err == nil {
							err = t0.Commit(ctx)
						}
					}
				} else {
					first, err = st.Claim(ctx, req)
					if err == nil && first.State == idemrt.Acquired {
						done.Epoch = first.Epoch
						err = st.Complete(ctx, done)
					}
				}
				if err != nil || first.State != idemrt.Acquired {
					t.Fatalf("transactional %v: first request %+v, %v", tx, first, err)
				}
				replay, err := st.Claim(ctx, req)
				if err != nil || replay.State != idemrt.Completed || replay.Epoch != first.Epoch || replay.Response == nil || string(replay.Response.Body) != `{"id":1}` {
					t.Fatalf("transactional %v: replay %+v, %v", tx, replay, err)
				}
			}
		})
	}
}
