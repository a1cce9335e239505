package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkReplayRead compares, each on a pool of one connection (so one
// server backend each), the store's read of a completed key (Claim, which a
// replay costs) with the bare handlers' reads of the HTTP benchmarks: the
// primary-key GET (get) and the replay floor's read of one packed column
// with its expiry (floor, harness.floorReplay's). Under valgrind's
// callgrind it counts instructions, which the machine's load does not move:
// the client's with the test binary under callgrind, the server's with a
// private cluster run under callgrind (valgrind --tool=callgrind
// --trace-children=yes postgres -D ...; each backend writes its own
// count). Run it at two counts and divide the difference of the totals by
// the difference of the counts (docs/performance-log.md, "PostgreSQL: a
// replay's read, counted on both sides"):
//
//	CGO_ENABLED=0 go test -c -o /tmp/pg.test ./internal/stores/postgres
//	cd internal/stores/postgres
//	GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
//	  /tmp/pg.test -test.run '^$' -test.bench 'ReplayRead/store$' -test.benchtime 2000x   # and 4000x
func BenchmarkReplayRead(b *testing.B) {
	db := newTestDB(b)
	one := func(c *pgxpool.Config) { c.MaxConns = 1 }
	// Cancellable, as a request's context and the wrapper's store bound
	// are: pgx watches it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := NewStore(ctx, db.pool(b, one))
	if err != nil {
		b.Fatal(err)
	}
	bare := db.pool(b, one)
	hb, err := BenchBackend(ctx, bare, st)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
	const rows = 200
	reqs := harness.CompletedKeys(b, ctx, st, rows, body)
	for _, req := range reqs {
		if err := hb.Insert(ctx, req.Key, body); err != nil {
			b.Fatal(err)
		}
		if err := hb.Save(ctx, req.Key, body, time.Now().Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("store", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			res, err := st.Claim(ctx, reqs[i%rows])
			if err != nil || res.State != idemrt.Completed {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := hb.GetSaved(ctx, reqs[i%rows].Key, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := hb.Get(ctx, reqs[i%rows].Key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
