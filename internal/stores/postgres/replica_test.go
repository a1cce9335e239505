package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReplicaRefused shows CONTRACT §4 on a real server in recovery (the
// shared test server is a primary and is not touched): a private cluster is
// created as a primary with the key tables, restarted as a hot standby, and
// NewStore over it fails naming pg_is_in_recovery; the same server, through
// the same pool, is accepted once promoted, and a claim on it is acquired.
// It starts its own server, so it runs only with IDEMGEN_TEST_REPLICAS set.
func TestReplicaRefused(t *testing.T) {
	harness.RequireReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	srv := harness.StartPostgres(t)
	t.Logf("cluster created and started as a primary in %s", time.Since(start).Round(time.Millisecond))

	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	primary, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The tables exist before the server becomes a standby, as they would on
	// a replica of a primary that has them: a refusal below is not a missing
	// table.
	if err := ApplySchema(ctx, primary); err != nil {
		t.Fatal(err)
	}
	primary.Close()

	srv.RestartAsStandby(t)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the server stops (cleanups run last first)
	var inRecovery bool
	if err := pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		t.Fatal(err)
	}
	if !inRecovery {
		t.Fatal("the standby is not in recovery: the test proves nothing")
	}
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&tables); err != nil {
		t.Fatalf("the standby does not have the key table: %v", err)
	}
	st, err := NewStore(ctx, pool)
	if err == nil || !strings.Contains(err.Error(), "pg_is_in_recovery") {
		t.Fatalf("NewStore on a server in recovery: store %v, error %v; want an error naming pg_is_in_recovery", st, err)
	}
	t.Logf("standby refused: %v", err)

	srv.Promote(t)
	if err := pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		t.Fatal(err)
	}
	if inRecovery {
		t.Fatal("still in recovery after pg_ctl promote -w")
	}
	st, err = NewStore(ctx, pool)
	if err != nil {
		t.Fatalf("NewStore on the promoted server: %v", err)
	}
	harness.ClaimWorks(t, st)
	t.Logf("promoted server accepted and a claim acquired; %s in all", time.Since(start).Round(time.Millisecond))
}
