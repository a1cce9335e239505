package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/testutil"
)

// testDB is one fresh database of the test server.
type testDB struct {
	cfg *mysql.Config
}

// newTestDB creates a fresh database (idemgen_test_<random>) with the key
// tables, dropped at the end of the test.
func newTestDB(t testing.TB) *testDB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testutil.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var b [6]byte
	rand.Read(b[:])
	name := "idemgen_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	cfg.DBName = name
	db := &testDB{cfg: cfg}
	conn := db.open(t, nil)
	if err := ApplySchema(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := ApplySchema(ctx, conn); err != nil { // again: start-up must be repeatable
		t.Fatalf("second ApplySchema: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE effects (id VARCHAR(255) NOT NULL, worker VARCHAR(255) NOT NULL) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	return db
}

// open opens a pool on the database; edit may change its configuration.
func (db *testDB) open(t testing.TB, edit func(*mysql.Config)) *sql.DB {
	t.Helper()
	cfg := db.cfg.Clone()
	if edit != nil {
		edit(cfg)
	}
	conn, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(24)
	conn.SetMaxIdleConns(24)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (db *testDB) store(t testing.TB) *Store {
	t.Helper()
	st, err := NewStore(context.Background(), db.open(t, nil))
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
