package mysql

import (
	"context"
	"database/sql"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// newBackend is the store over conn with the effects the fault tests
// observe; the handler's writes go through the generated TxFromContext.
func newBackend(ctx context.Context, conn *sql.DB, opts ...Option) (*harness.Backend, error) {
	st, err := NewStore(ctx, conn, opts...)
	if err != nil {
		return nil, err
	}
	b := harness.SQLBackend(st, conn, TxFromContext, MarkProcessed)
	// As the sweeper's batches: READ COMMITTED, so no gap locks.
	b.Hold = func(ctx context.Context, n int) (func(), error) {
		tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		rows, err := tx.QueryContext(ctx, "SELECT idem_key FROM idempotency_keys ORDER BY sweep_at LIMIT ? FOR UPDATE SKIP LOCKED", n)
		if err != nil {
			tx.Rollback()
			return nil, err
		}
		rows.Close()
		return func() { tx.Rollback() }, nil
	}
	return b, nil
}

func (db *testDB) backend(t testing.TB, edit func(*mysql.Config)) *harness.Backend {
	t.Helper()
	b, err := newBackend(context.Background(), db.open(t, edit))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDuplicateStorm(t *testing.T) {
	db := newTestDB(t)
	// 200 goroutines over four pools of 20 connections.
	var stores []idemrt.Store
	for range 4 {
		conn := db.open(t, nil)
		conn.SetMaxOpenConns(20)
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	harness.Storm(t, db.backend(t, nil), stores, 200)
}

// TestDuplicateStormTransactional: the same storm on a transactional
// operation. Duplicates wait on the first attempt's uncommitted record
// (innodb_lock_wait_timeout=1 in the DSN bounds the wait), then replay or
// are told 409.
func TestDuplicateStormTransactional(t *testing.T) {
	db := newTestDB(t)
	lockWait := func(c *mysql.Config) {
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params["innodb_lock_wait_timeout"] = "1"
	}
	var stores []idemrt.Store
	for range 4 {
		conn := db.open(t, lockWait)
		conn.SetMaxOpenConns(20)
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	harness.StormTransactional(t, db.backend(t, lockWait), stores, 200)
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
	// The driver logs every connection the cut breaks; the test checks them.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	t.Cleanup(func() { mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile)) })
	proxy := harness.NewProxy(t, db.cfg.Addr)
	through := db.backend(t, func(c *mysql.Config) {
		c.Addr = proxy.Addr()
		c.Timeout = 2 * time.Second
	})
	harness.StoreCut(t, through, db.backend(t, nil), proxy)
}

// A MariaDB that stops answering (connections open, no bytes): 503
// within Options.StoreTimeout, no handler run, and after the stall a retry
// runs once.
func TestStoreStall(t *testing.T) {
	db := newTestDB(t)
	mysql.SetLogger(log.New(io.Discard, "", 0))
	t.Cleanup(func() { mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile)) })
	proxy := harness.NewProxy(t, db.cfg.Addr)
	through := db.backend(t, func(c *mysql.Config) {
		c.Addr = proxy.Addr()
		c.Timeout = 2 * time.Second
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
// clock, in UTC whatever the session's time zone: two servers whose
// sessions run in time zones 24 hours apart agree on the lease, and the
// second cannot take the key before it ends.
func TestDatabaseClock(t *testing.T) {
	db := newTestDB(t)
	a := db.backend(t, func(c *mysql.Config) { c.Params = map[string]string{"time_zone": "'+13:00'"} }).Store.(*Store)
	b := db.backend(t, func(c *mysql.Config) { c.Params = map[string]string{"time_zone": "'-11:00'"} }).Store.(*Store)
	harness.DatabaseClock(t, a, b, func(ctx context.Context, key string) (time.Duration, error) {
		var us int64
		err := a.db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), lease_until) FROM idempotency_keys WHERE idem_key = ?", key).Scan(&us)
		return time.Duration(us) * time.Microsecond, err
	})
}

// TestPrimaryOnly: a read-only session is refused with an error that says
// why, and so is clientFoundRows (under which a live record would look
// newly inserted).
func TestPrimaryOnly(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	ro := db.open(t, func(c *mysql.Config) { c.Params = map[string]string{"tx_read_only": "1"} })
	if _, err := NewStore(ctx, ro); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("NewStore on a read-only session: %v, want a read-only error", err)
	}
	found := db.open(t, func(c *mysql.Config) { c.ClientFoundRows = true })
	if _, err := NewStore(ctx, found); err == nil || !strings.Contains(err.Error(), "clientFoundRows") {
		t.Errorf("NewStore with clientFoundRows: %v, want an error naming it", err)
	}
	for _, v := range []string{"read_only", "super_read_only"} {
		if err := checkPrimary(map[string]string{v: "ON"}); err == nil || !strings.Contains(err.Error(), "@@"+v) {
			t.Errorf("%s on: %v", v, err)
		}
	}
	if err := checkPrimary(map[string]string{"read_only": "OFF", "tx_read_only": "0"}); err != nil {
		t.Errorf("primary refused: %v", err)
	}
}

func TestLargeResponse(t *testing.T) {
	db := newTestDB(t)
	harness.LargeResponse(t, db.store(t))
}

func TestRetention(t *testing.T) {
	db := newTestDB(t)
	b, err := newBackend(context.Background(), db.open(t, nil), ProcessedRetention(2*time.Second))
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
		stores = append(stores, db.backend(t, nil).Store)
	}
	harness.ConcurrentSweepers(t, db.backend(t, nil), stores)
}

func TestDeclined(t *testing.T) {
	db := newTestDB(t)
	harness.Declined(t, db.backend(t, nil))
}
