package mysql

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkSweepers: one sweeper, then four (each on its own connection
// pool, as on four servers), empty a table of 20000 expired records in
// batches of 500:
//
//	go test ./internal/stores/mysql -run '^$' -bench Sweepers -benchtime 1x -count 3
func BenchmarkSweepers(b *testing.B) {
	db := newTestDB(b)
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(b, nil).Store)
	}
	harness.SweepThroughput(b, stores, 20000, 500)
}

// BenchmarkHTTP measures what users pay, through a real net/http server on
// 127.0.0.1 with 16 clients (see harness.HTTPRatios); a pool of 16
// connections.
//
//	go test ./internal/stores/mysql -run '^$' -bench HTTP -benchtime 1x -count 3
func BenchmarkHTTP(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b, nil)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	st, err := NewStore(context.Background(), conn)
	if err != nil {
		b.Fatal(err)
	}
	harness.HTTPRatios(b, harness.SQLHTTPBackend(b, st, conn, TxFromContext, "VARBINARY(255)", "BLOB"))
}
