package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/idemgen/idemgen/internal/testutil"
	_ "modernc.org/sqlite"
)

// testDB is one fresh database file in t.TempDir().
type testDB struct {
	path string
}

// dsn is the recommended DSN (see Store's documentation).
func (db *testDB) dsn() string {
	return "file:" + db.path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

func newTestDB(t testing.TB) *testDB {
	t.Helper()
	db := &testDB{path: filepath.Join(t.TempDir(), "idem.db")}
	conn := db.open(t)
	ctx := context.Background()
	if err := ApplySchema(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := ApplySchema(ctx, conn); err != nil { // again: start-up must be repeatable
		t.Fatalf("second ApplySchema: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE effects (id TEXT NOT NULL, worker TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db
}

func (db *testDB) open(t testing.TB) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite", db.dsn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (db *testDB) store(t testing.TB) *Store {
	t.Helper()
	st, err := NewStore(context.Background(), db.open(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}
