package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/internal/testutil"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testDB is one fresh schema of the test server.
type testDB struct {
	dsn    string
	schema string
}

// newTestDB creates a fresh schema (idemgen_test_<random>) with the key
// tables, dropped at the end of the test.
func newTestDB(t testing.TB) *testDB {
	t.Helper()
	dsn := testutil.PostgresDSN(t)
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	db := &testDB{dsn: dsn, schema: "idemgen_test_" + hex.EncodeToString(b[:])}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+db.schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+db.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	pool := db.pool(t, nil)
	if err := ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := ApplySchema(ctx, pool); err != nil { // again: start-up must be repeatable
		t.Fatalf("second ApplySchema: %v", err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (id text NOT NULL, worker text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// pool opens a pool on the schema; edit may change its configuration
// (e.g. to connect through a proxy).
func (db *testDB) pool(t testing.TB, edit func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = db.schema
	cfg.MaxConns = 24
	if edit != nil {
		edit(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// proxy starts a harness.Proxy in front of the server and returns it with
// the pool edit that connects through it.
func (db *testDB) proxy(t testing.TB) (*harness.Proxy, func(*pgxpool.Config)) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := harness.NewProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	return proxy, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = host, uint16(p), nil
	}
}

func (db *testDB) store(t testing.TB) *Store {
	t.Helper()
	st, err := NewStore(context.Background(), db.pool(t, nil))
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
