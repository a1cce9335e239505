package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkSweepers: one sweeper, then four (each on its own connection
// pool, as on four servers), empty a table of 20000 expired records in
// batches of 500 and of 1000 (sub-benchmarks); see harness.SweepThroughput
// for the metrics (speedup: four sweepers' records/s over one's):
//
//	go test ./internal/stores/mysql -run '^$' -bench 'Sweepers$' -benchtime 1x -count 3
func BenchmarkSweepers(b *testing.B) {
	db := newTestDB(b)
	fill := db.backend(b, nil).Store
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(b, nil).Store)
	}
	harness.SweepBatches(b, fill, stores)
}

// BenchmarkSweepersNetwork is BenchmarkSweepers with each sweeper's pool
// connected through its own harness.Proxy that delays each direction by
// 1 ms, as sweepers on separate servers reach the database over a network:
// a batch (SET TRANSACTION, begin, the locking SELECT, the DELETE's prepare
// and execute, commit) then waits six round trips (12 ms) besides the
// server's work, which other sweepers' batches can use; batches of 1000
// delete in two DELETE statements of 500, two round trips more. The
// records are created over a direct connection. The proxies' copying runs
// on the same 2 cores.
//
//	go test ./internal/stores/mysql -run '^$' -bench SweepersNetwork -benchtime 1x -count 3
func BenchmarkSweepersNetwork(b *testing.B) {
	db := newTestDB(b)
	fill := db.backend(b, nil).Store
	var stores []idemrt.Store
	for range 4 {
		proxy := harness.NewProxy(b, db.cfg.Addr)
		proxy.Delay(time.Millisecond)
		stores = append(stores, db.backend(b, func(c *mysql.Config) { c.Addr = proxy.Addr() }).Store)
	}
	harness.SweepBatches(b, fill, stores)
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

// BenchmarkHTTPFloor measures, through BenchmarkHTTP's server and clients,
// the floors of a first request (BenchFloors, harness.StoreFloors) against
// the bare INSERT handler, with BenchmarkHTTP's newkey and newkey-tx in the
// same rounds.
//
//	go test ./internal/stores/mysql -run '^$' -bench HTTPFloor -benchtime 1x -count 3
func BenchmarkHTTPFloor(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b, nil)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	ctx := context.Background()
	st, err := NewStore(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	hb := harness.SQLHTTPBackend(b, st, conn, TxFromContext, "VARBINARY(255)", "BLOB")
	floors, closeStmts, err := BenchFloors(ctx, conn, hb)
	if err != nil {
		b.Fatal(err)
	}
	defer closeStmts()
	harness.HTTPFloors(b, hb, floors)
}
