package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkStore: 16 concurrent clients through the wrapper (new keys,
// replays) and plain SQL on the same database handle (16 connections).
//
//	go test ./internal/stores/sqlite -run '^$' -bench Store -benchtime 5s
func BenchmarkStore(b *testing.B) {
	st, base := benchSetup(b)
	harness.Bench(b, st, base)
}

// BenchmarkRatio measures the target ratios with interleaved sides:
//
//	go test ./internal/stores/sqlite -run '^$' -bench Ratio -benchtime 1x -count 5
func BenchmarkRatio(b *testing.B) {
	st, base := benchSetup(b)
	harness.Ratios(b, st, base)
}

func benchSetup(b *testing.B) (idemrt.Store, harness.Baseline) {
	db := newTestDB(b)
	conn := db.open(b)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	ctx := context.Background()
	st, err := NewStore(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE plain (id TEXT PRIMARY KEY, body BLOB NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
	const rows = 1000
	preloaded := func(i int) string { return fmt.Sprintf("pre-%d", i) }
	for i := range rows {
		if _, err := conn.ExecContext(ctx, "INSERT INTO plain (id, body) VALUES (?, ?)", preloaded(i), body); err != nil {
			b.Fatal(err)
		}
	}
	return st, harness.Baseline{
		Insert: func(ctx context.Context, id string) error {
			_, err := conn.ExecContext(ctx, "INSERT INTO plain (id, body) VALUES (?, ?)", id, body)
			return err
		},
		Select: func(ctx context.Context, id string) error {
			var got []byte
			return conn.QueryRowContext(ctx, "SELECT body FROM plain WHERE id = ?", id).Scan(&got)
		},
		Preloaded: preloaded,
		Rows:      rows,
	}
}

// BenchmarkHTTP measures what users pay, through a real net/http server on
// 127.0.0.1 with 16 clients (see harness.HTTPRatios); one handle of 16
// connections, WAL.
//
//	go test ./internal/stores/sqlite -run '^$' -bench HTTP -benchtime 1x -count 3
func BenchmarkHTTP(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	ctx := context.Background()
	st, err := NewStore(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	harness.HTTPRatios(b, harness.SQLHTTPBackend(b, st, conn, TxFromContext, "TEXT", "BLOB"))
}

// BenchmarkHTTPFloor measures, through BenchmarkHTTP's server and clients,
// the floors of a first request (BenchFloors, harness.StoreFloors) against
// the bare INSERT handler, with BenchmarkHTTP's newkey and newkey-tx in the
// same rounds.
//
//	go test ./internal/stores/sqlite -run '^$' -bench HTTPFloor -benchtime 1x -count 3
func BenchmarkHTTPFloor(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	ctx := context.Background()
	st, err := NewStore(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	hb := harness.SQLHTTPBackend(b, st, conn, TxFromContext, "TEXT", "BLOB")
	floors, closeStmts, err := BenchFloors(ctx, conn, hb)
	if err != nil {
		b.Fatal(err)
	}
	defer closeStmts()
	harness.HTTPFloors(b, hb, floors)
}
