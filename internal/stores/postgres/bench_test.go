package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkStore: 16 concurrent clients through the wrapper (new keys,
// replays) and plain SQL on the same pool of 16 connections.
//
//	go test ./internal/stores/postgres -run '^$' -bench Store -benchtime 5s
func BenchmarkStore(b *testing.B) {
	st, base := benchSetup(b, 0)
	harness.Bench(b, st, base)
}

// BenchmarkRatio measures the target ratios with interleaved sides:
//
//	go test ./internal/stores/postgres -run '^$' -bench Ratio -benchtime 1x -count 5
func BenchmarkRatio(b *testing.B) {
	st, base := benchSetup(b, 0)
	harness.Ratios(b, st, base)
}

// BenchmarkRatioNetwork is BenchmarkRatio with the pool connected through
// an in-test proxy that delays each direction by 1 ms, as a network between
// the application and the database would; the proxy's copying runs on the
// same 2 cores. (With a shorter delay the result depends on the load: an
// idle Go process wakes from a timer no sooner than about 1 ms, a busy one
// on time.) It also reports rtt-ms, one client's primary-key SELECT through
// the proxy:
//
//	go test ./internal/stores/postgres -run '^$' -bench RatioNetwork -benchtime 1x -count 3
func BenchmarkRatioNetwork(b *testing.B) {
	st, base := benchSetup(b, time.Millisecond)
	const n = 100
	start := time.Now()
	for i := range n {
		if err := base.Select(context.Background(), base.Preloaded(i%base.Rows)); err != nil {
			b.Fatal(err)
		}
	}
	rtt := time.Since(start) / n
	harness.Ratios(b, st, base)
	b.ReportMetric(float64(rtt.Microseconds())/1000, "rtt-ms")
}

// benchSetup opens a pool of harness.Clients connections, directly or,
// with delay > 0, through a proxy that delays each direction by delay.
func benchSetup(b testing.TB, delay time.Duration) (idemrt.Store, harness.Baseline) {
	db := newTestDB(b)
	via := func(*pgxpool.Config) {}
	if delay > 0 {
		var proxy *harness.Proxy
		proxy, via = db.proxy(b)
		proxy.Delay(delay)
	}
	pool := db.pool(b, func(c *pgxpool.Config) {
		c.MaxConns = harness.Clients
		via(c)
	})
	ctx := context.Background()
	st, err := NewStore(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE plain (id text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
	const rows = 1000
	preloaded := func(i int) string { return fmt.Sprintf("pre-%d", i) }
	for i := range rows {
		if _, err := pool.Exec(ctx, "INSERT INTO plain (id, body) VALUES ($1, $2)", preloaded(i), body); err != nil {
			b.Fatal(err)
		}
	}
	return st, harness.Baseline{
		Insert: func(ctx context.Context, id string) error {
			_, err := pool.Exec(ctx, "INSERT INTO plain (id, body) VALUES ($1, $2)", id, body)
			return err
		},
		Select: func(ctx context.Context, id string) error {
			var got []byte
			return pool.QueryRow(ctx, "SELECT body FROM plain WHERE id = $1", id).Scan(&got)
		},
		Preloaded: preloaded,
		Rows:      rows,
	}
}

// BenchmarkSweepers: one sweeper, then four (each on its own pool, as on
// four servers), empty a table of 20000 expired records in batches of 500
// and of 1000 (sub-benchmarks); see harness.SweepThroughput for the
// metrics (speedup: four sweepers' records/s over one's):
//
//	go test ./internal/stores/postgres -run '^$' -bench 'Sweepers$' -benchtime 1x -count 3
func BenchmarkSweepers(b *testing.B) {
	db := newTestDB(b)
	fill := db.backend(b, nil).Store
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(b, func(c *pgxpool.Config) { c.MaxConns = 8 }).Store)
	}
	harness.SweepBatches(b, fill, stores)
}

// BenchmarkSweepersNetwork is BenchmarkSweepers with each sweeper's pool
// connected through its own harness.Proxy that delays each direction by
// 1 ms, as sweepers on separate servers reach the database over a network:
// a batch then waits a round trip (2 ms) besides the server's work, which
// other sweepers' batches can use. The records are created over a direct
// connection. The proxies' copying runs on the same 2 cores.
//
//	go test ./internal/stores/postgres -run '^$' -bench SweepersNetwork -benchtime 1x -count 3
func BenchmarkSweepersNetwork(b *testing.B) {
	db := newTestDB(b)
	fill := db.backend(b, nil).Store
	var stores []idemrt.Store
	for range 4 {
		proxy, via := db.proxy(b)
		proxy.Delay(time.Millisecond)
		stores = append(stores, db.backend(b, func(c *pgxpool.Config) {
			c.MaxConns = 8
			via(c)
		}).Store)
	}
	harness.SweepBatches(b, fill, stores)
}

// BenchmarkHTTP measures what users pay, through a real net/http server on
// 127.0.0.1 with 16 clients (see harness.HTTPRatios): a handler inserting
// one row, bare and protected in both modes, and a bare primary-key GET
// against replays; the pool has 16 connections.
//
//	go test ./internal/stores/postgres -run '^$' -bench HTTP -benchtime 1x -count 3
func BenchmarkHTTP(b *testing.B) {
	db := newTestDB(b)
	pool := db.pool(b, func(c *pgxpool.Config) { c.MaxConns = harness.Clients })
	ctx := context.Background()
	st, err := NewStore(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	hb, err := BenchBackend(ctx, pool, st)
	if err != nil {
		b.Fatal(err)
	}
	harness.HTTPRatios(b, hb)
}
