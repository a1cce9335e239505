package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	b.DuplicateWaits = true // on SQLite's write lock
	return b, nil
}

func (db *testDB) backend(t testing.TB) *harness.Backend {
	t.Helper()
	b, err := newBackend(context.Background(), db.open(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDuplicateStorm(t *testing.T) {
	db := newTestDB(t)
	// 200 goroutines, each on its own database handle with one connection.
	var stores []idemrt.Store
	for range 200 {
		conn := db.open(t)
		conn.SetMaxOpenConns(1)
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	harness.Storm(t, db.backend(t), stores, 200)
}

// TestDuplicateStormTransactional: the same storm on a transactional
// operation. The first attempt's transaction holds the write lock through
// its handler; every duplicate waits for it (busy_timeout) and replays.
func TestDuplicateStormTransactional(t *testing.T) {
	db := newTestDB(t)
	var stores []idemrt.Store
	for range 200 {
		conn := db.open(t)
		conn.SetMaxOpenConns(1)
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	harness.StormTransactional(t, db.backend(t), stores, 200)
}

func TestDuplicateStormProcesses(t *testing.T) {
	db := newTestDB(t)
	harness.StormProcesses(t, db.backend(t), db.starter(), 8)
}

func TestTransactional(t *testing.T) {
	db := newTestDB(t)
	harness.Transactional(t, db.backend(t))
}

func TestCrashTransactional(t *testing.T) {
	db := newTestDB(t)
	harness.CrashTransactional(t, db.backend(t), db.starter())
}

func TestStaleWorkerFenced(t *testing.T) {
	db := newTestDB(t)
	harness.StaleWorker(t, db.backend(t), db.starter())
}

func TestConsumer(t *testing.T) {
	db := newTestDB(t)
	harness.Consumer(t, db.backend(t), 50)
}

func TestSweeper(t *testing.T) {
	db := newTestDB(t)
	harness.Sweeper(t, db.backend(t))
}

// TestNewStoreRefuses: without a busy timeout concurrent writers fail at
// once, and an in-memory database cannot use WAL.
func TestNewStoreRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ dsn, want string }{
		{"file:" + filepath.Join(t.TempDir(), "a.db"), "busy_timeout is 0"},
		{"file::memory:?_pragma=busy_timeout(5000)", "not WAL"},
	} {
		conn, err := sql.Open("sqlite", tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = NewStore(ctx, conn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewStore(%s): %v, want an error saying %q", tc.dsn, err, tc.want)
		}
	}
	// NewStore switches a file database to WAL itself.
	conn, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "b.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := NewStore(ctx, conn); err == nil || !strings.Contains(err.Error(), "apply the schema first") {
		t.Errorf("NewStore before the schema: %v, want an error saying to apply it", err)
	}
	if err := ApplySchema(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(ctx, conn); err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v; want wal", mode, err)
	}
}

func TestLargeResponse(t *testing.T) {
	db := newTestDB(t)
	harness.LargeResponse(t, db.store(t))
}

func TestRetention(t *testing.T) {
	db := newTestDB(t)
	b, err := newBackend(context.Background(), db.open(t), ProcessedRetention(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	harness.Retention(t, b, 2*time.Second)
}

// SQLite has one writer at a time: concurrent sweepers take turns, and
// claims go through between their batches.
func TestConcurrentSweepers(t *testing.T) {
	db := newTestDB(t)
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(t).Store)
	}
	harness.ConcurrentSweepers(t, db.backend(t), stores)
}

func TestDeclined(t *testing.T) {
	db := newTestDB(t)
	harness.Declined(t, db.backend(t))
}
