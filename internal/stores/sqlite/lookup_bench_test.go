package sqlite

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkReplayRead compares, on one connection, the store's read of a
// completed key (Claim, which a replay costs) with the bare handler's read
// of BenchmarkHTTP (a prepared one-column SELECT by a TEXT primary key):
// the store's share of a replay, free of HTTP. Under valgrind's callgrind it
// counts instructions, which the machine's load does not move: run it at two
// counts and divide the difference of the totals by the difference of the
// counts (valgrind 3.19 knows neither Go's preemption signal nor RDTSCP; with
// more than one P, the idle Ps' spinning under valgrind moves the totals by
// more than a read costs, and with the collector on, so does how often it
// runs):
//
//	CGO_ENABLED=0 go test -c -o /tmp/sqlite.test ./internal/stores/sqlite
//	cd internal/stores/sqlite
//	GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
//	  /tmp/sqlite.test -test.run '^$' -test.bench 'ReplayRead/store$' -test.benchtime 2000x   # and 6000x
func BenchmarkReplayRead(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b)
	conn.SetMaxOpenConns(1)
	// Cancellable, as a request's context and the wrapper's store bound
	// are: a driver may watch it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := NewStore(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE plain (id TEXT PRIMARY KEY, body BLOB NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
	const rows = 1000
	reqs := harness.CompletedKeys(b, ctx, st, rows, body)
	for _, req := range reqs {
		if _, err := conn.ExecContext(ctx, "INSERT INTO plain (id, body) VALUES (?, ?)", req.Key, body); err != nil {
			b.Fatal(err)
		}
	}
	sel, err := conn.PrepareContext(ctx, "SELECT body FROM plain WHERE id = ?")
	if err != nil {
		b.Fatal(err)
	}
	defer sel.Close()
	b.Run("store", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			res, err := st.Claim(ctx, reqs[i%rows])
			if err != nil || res.State != idemrt.Completed {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			var got []byte
			if err := sel.QueryRowContext(ctx, reqs[i%rows].Key).Scan(&got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
