package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newBackend is the store over pool with the effects the fault tests
// observe; the handler's writes go through the generated TxFromContext.
func newBackend(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*harness.Backend, error) {
	st, err := NewStore(ctx, pool, opts...)
	if err != nil {
		return nil, err
	}
	const insert = "INSERT INTO effects (id, worker) VALUES ($1, $2)"
	return &harness.Backend{
		Store: st,
		Effect: func(ctx context.Context, id, worker string) error {
			if tx, ok := TxFromContext(ctx); ok {
				_, err := tx.Exec(ctx, insert, id, worker)
				return err
			}
			_, err := pool.Exec(ctx, insert, id, worker)
			return err
		},
		Effects: func(ctx context.Context, id string) (n int, err error) {
			err = pool.QueryRow(ctx, "SELECT count(*) FROM effects WHERE id = $1", id).Scan(&n)
			return n, err
		},
		Hold: func(ctx context.Context, n int) (func(), error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := tx.Exec(ctx, "SELECT idem_key FROM idempotency_keys ORDER BY sweep_at LIMIT $1 FOR UPDATE SKIP LOCKED", n); err != nil {
				tx.Rollback(ctx)
				return nil, err
			}
			return func() { tx.Rollback(context.Background()) }, nil
		},
		Deliver: func(ctx context.Context, consumer, id string, hold time.Duration, rollback bool) (bool, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return false, err
			}
			defer tx.Rollback(ctx)
			first, err := MarkProcessed(ctx, tx, consumer, id)
			if err != nil {
				return false, err
			}
			if first {
				if _, err := tx.Exec(ctx, insert, id, "consumer"); err != nil {
					return false, err
				}
			}
			time.Sleep(hold)
			if rollback {
				return first, tx.Rollback(ctx)
			}
			return first, tx.Commit(ctx)
		},
		Records: func(ctx context.Context) (n int, err error) {
			err = pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&n)
			return n, err
		},
	}, nil
}

func (db *testDB) backend(t testing.TB, edit func(*pgxpool.Config)) *harness.Backend {
	t.Helper()
	b, err := newBackend(context.Background(), db.pool(t, edit))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDuplicateStorm(t *testing.T) {
	db := newTestDB(t)
	b := db.backend(t, nil)
	// 200 goroutines over four pools of 12 connections (the server allows
	// 100 connections in all).
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(t, func(c *pgxpool.Config) { c.MaxConns = 12 }).Store)
	}
	harness.Storm(t, b, stores, 200)
}

// TestDuplicateStormTransactional: the same storm on a transactional
// operation, whose record stays uncommitted until the handler's writes
// commit with it: duplicates learn of it through the advisory lock (409 at
// once) or, in wait mode, poll until it commits and replay.
func TestDuplicateStormTransactional(t *testing.T) {
	db := newTestDB(t)
	b := db.backend(t, nil)
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(t, func(c *pgxpool.Config) { c.MaxConns = 12 }).Store)
	}
	harness.StormTransactional(t, b, stores, 200)
}

func TestDuplicateStormProcesses(t *testing.T) {
	db := newTestDB(t)
	harness.StormProcesses(t, db.backend(t, nil), db.starter(), 8)
}

func TestTransactional(t *testing.T) {
	db := newTestDB(t)
	harness.Transactional(t, db.backend(t, nil))
}

func TestCrashTransactional(t *testing.T) {
	db := newTestDB(t)
	harness.CrashTransactional(t, db.backend(t, nil), db.starter())
}

func TestStaleWorkerFenced(t *testing.T) {
	db := newTestDB(t)
	harness.StaleWorker(t, db.backend(t, nil), db.starter())
}

func TestStoreCut(t *testing.T) {
	db := newTestDB(t)
	proxy, via := db.proxy(t)
	through := db.backend(t, func(c *pgxpool.Config) {
		via(c)
		c.ConnConfig.ConnectTimeout = 2 * time.Second
	})
	harness.StoreCut(t, through, db.backend(t, nil), proxy)
}

// A PostgreSQL that stops answering (connections open, no bytes): 503
// within Options.StoreTimeout, no handler run, and after the stall a retry
// runs once.
func TestStoreStall(t *testing.T) {
	db := newTestDB(t)
	proxy, via := db.proxy(t)
	through := db.backend(t, func(c *pgxpool.Config) {
		via(c)
		c.ConnConfig.ConnectTimeout = 2 * time.Second
	})
	harness.StoreStall(t, through, db.backend(t, nil), proxy)
}

func TestConsumer(t *testing.T) {
	db := newTestDB(t)
	harness.Consumer(t, db.backend(t, nil), 50)
}

func TestSweeper(t *testing.T) {
	db := newTestDB(t)
	harness.Sweeper(t, db.backend(t, nil))
}

// TestDatabaseClock shows that leases are measured on the database's
// clock: the lease a claim stores is now() + lease on the server, whatever
// the application's clock says, and a second server (another pool) sees
// the same lease and cannot take the key before it ends. No application
// clock is read by the store (TestNoAppClock in the harness checks the
// source).
func TestDatabaseClock(t *testing.T) {
	db := newTestDB(t)
	a, b := db.store(t), db.store(t)
	harness.DatabaseClock(t, a, b, func(ctx context.Context, key string) (d time.Duration, err error) {
		err = a.pool.QueryRow(ctx, "SELECT lease_until - now() FROM idempotency_keys WHERE idem_key = $1", key).Scan(&d)
		return d, err
	})
}

// TestPrimaryOnly: a read-only session is refused with an error that says
// why, and the decision on a server in recovery is checked here too;
// TestReplicaRefused (replica_test.go) runs it against a real standby.
func TestPrimaryOnly(t *testing.T) {
	db := newTestDB(t)
	pool := db.pool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on" })
	_, err := NewStore(context.Background(), pool)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("NewStore on a read-only session: %v, want a read-only error", err)
	}
	if err := checkPrimary(true, false); err == nil || !strings.Contains(err.Error(), "pg_is_in_recovery") {
		t.Errorf("server in recovery: %v", err)
	}
	if err := checkPrimary(false, false); err != nil {
		t.Errorf("primary refused: %v", err)
	}
}

var _ = pgx.ErrNoRows

func TestLargeResponse(t *testing.T) {
	db := newTestDB(t)
	harness.LargeResponse(t, db.store(t))
}

func TestRetention(t *testing.T) {
	db := newTestDB(t)
	b, err := newBackend(context.Background(), db.pool(t, nil), ProcessedRetention(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	harness.Retention(t, b, 2*time.Second)
}

func TestSweepersSkipLocked(t *testing.T) {
	db := newTestDB(t)
	harness.SweepersSkipLocked(t, db.backend(t, nil))
}

func TestConcurrentSweepers(t *testing.T) {
	db := newTestDB(t)
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(t, func(c *pgxpool.Config) { c.MaxConns = 4 }).Store)
	}
	harness.ConcurrentSweepers(t, db.backend(t, nil), stores)
}

func TestDeclined(t *testing.T) {
	db := newTestDB(t)
	harness.Declined(t, db.backend(t, nil))
}
