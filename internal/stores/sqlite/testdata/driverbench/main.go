// Command driverbench measures the SQLite store's statements on two
// database/sql drivers, modernc.org/sqlite ("sqlite", idemgen's default) and
// github.com/ncruces/go-sqlite3 ("sqlite3"), in alternating slices so that a
// change of load on a shared machine hits both alike. It is a module of its
// own under testdata, so that neither CI nor the root module's graph
// carries the second driver (run it with GOWORK=off: the repository's
// go.work does not list it); cold.sh beside it measures the cold builds.
//
// The schema and the statements are read from the repository's
// templates/sqlite (idemgen_schema.sql, idemgen_queries.sql): sqlc.arg(x)
// becomes the named parameter :x. The DSN is the one docs/stores.md
// recommends (WAL, busy_timeout, _txlock=immediate), which both drivers
// read alike.
//
//	cd internal/stores/sqlite/testdata/driverbench
//	flock /tmp/idemgen-bench.lock env GOWORK=off go run . -rounds 6 -slice 1s -synchronous 2
//	flock /tmp/idemgen-bench.lock env GOWORK=off go run . -rounds 6 -slice 1s -synchronous 2 -clients 16
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
	_ "modernc.org/sqlite"
)

var drivers = []string{"sqlite", "sqlite3"} // modernc, ncruces

var synchronous string

func main() {
	tmpl := flag.String("templates", "../../../../../templates/sqlite", "the repository's templates/sqlite folder")
	rounds := flag.Int("rounds", 6, "rounds (each runs every case on every driver)")
	slice := flag.Duration("slice", time.Second, "time of one case on one driver in one round")
	clients := flag.Int("clients", 1, "concurrent clients (connections) per case")
	dir := flag.String("dir", "", "folder of the database files (default: a temporary one)")
	flag.StringVar(&synchronous, "synchronous", "", "PRAGMA synchronous for both drivers (default: each driver's own)")
	only := flag.String("cases", "", "comma-separated cases to run (default: all)")
	profile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "driverbench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *only != "" {
		names := strings.Split(*only, ",")
		for _, n := range names {
			if !slices.ContainsFunc(cases, func(c benchCase) bool { return c.name == n }) {
				fmt.Fprintf(os.Stderr, "driverbench: -cases: no case %q\n", n)
				os.Exit(2)
			}
		}
		cases = slices.DeleteFunc(cases, func(c benchCase) bool { return !slices.Contains(names, c.name) })
	}
	if !slices.Contains([]string{"", "0", "1", "2", "3", "OFF", "NORMAL", "FULL", "EXTRA"}, strings.ToUpper(synchronous)) {
		fmt.Fprintf(os.Stderr, "driverbench: -synchronous %q: want 0-3 or OFF, NORMAL, FULL, EXTRA\n", synchronous)
		os.Exit(2)
	}
	if err := run(*tmpl, *dir, *rounds, *slice, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "driverbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// queries reads the named statements of idemgen_queries.sql.
func queries(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	arg := regexp.MustCompile(`sqlc\.arg\((\w+)\)`)
	out := map[string]string{}
	for _, block := range strings.Split(string(b), "-- name: ")[1:] {
		name, _, _ := strings.Cut(block, " ")
		var lines []string
		for _, l := range strings.Split(block, "\n")[1:] {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		// As sqlc writes them: no trailing semicolon (modernc.org/sqlite
		// parses a statement with a tail again at every execution).
		q := strings.TrimRight(strings.TrimSpace(strings.Join(lines, "\n")), ";")
		out[name] = arg.ReplaceAllString(q, ":$1")
	}
	return out, nil
}

type bench struct {
	db                        *sql.DB
	lookup, acquire, complete *sql.Stmt
	insert, sel               *sql.Stmt
	n                         atomic.Int64 // sequence of new keys
	prefix                    string
}

const replayKeys = 1000

var (
	principal = make([]byte, 32)
	finger    = make([]byte, 32)
	body      = []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
)

func open(ctx context.Context, driver, path, schema string, q map[string]string, clients int) (*bench, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	if synchronous != "" {
		dsn += "&_pragma=synchronous(" + synchronous + ")"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(clients)
	db.SetMaxIdleConns(clients)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS plain (id TEXT PRIMARY KEY, body BLOB NOT NULL)"); err != nil {
		return nil, err
	}
	b := &bench{db: db, prefix: driver}
	for _, s := range []struct {
		p   **sql.Stmt
		sql string
	}{
		{&b.lookup, q["Lookup"]}, {&b.acquire, q["Acquire"]}, {&b.complete, q["Complete"]},
		{&b.insert, "INSERT INTO plain (id, body) VALUES (?, ?)"},
		{&b.sel, "SELECT body FROM plain WHERE id = ?"},
	} {
		if *s.p, err = db.PrepareContext(ctx, s.sql); err != nil {
			return nil, fmt.Errorf("prepare %q: %w", s.sql, err)
		}
	}
	for i := range replayKeys {
		if _, err := b.insert.ExecContext(ctx, fmt.Sprintf("pre-%d", i), body); err != nil {
			return nil, err
		}
		key := fmt.Sprintf("replay-%d", i)
		epoch, err := b.claim(ctx, key)
		if err != nil {
			return nil, err
		}
		if err := b.done(ctx, key, epoch); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func named(key string) []any {
	return []any{sql.Named("scope", "createCharge"), sql.Named("principal", principal), sql.Named("idem_key", key)}
}

// read is the store's Lookup of a key: its liveness and saved response.
func (b *bench) read(ctx context.Context, key string) (live int64, err error) {
	var epoch, fv, status int64
	var fp, headers, resp []byte
	err = b.lookup.QueryRowContext(ctx, named(key)...).Scan(&live, &epoch, &fp, &fv, &status, &headers, &resp)
	return live, err
}

// claim is the store's Claim of a new key: a Lookup that finds nothing,
// then the Acquire upsert.
func (b *bench) claim(ctx context.Context, key string) (epoch int64, err error) {
	if _, err := b.read(ctx, key); err != sql.ErrNoRows {
		return 0, fmt.Errorf("lookup of a new key: %v", err)
	}
	args := append(named(key), sql.Named("fingerprint", finger), sql.Named("fingerprint_version", 1),
		sql.Named("lease_ms", 60000), sql.Named("ttl_ms", 3600000))
	err = b.acquire.QueryRowContext(ctx, args...).Scan(&epoch)
	return epoch, err
}

func (b *bench) done(ctx context.Context, key string, epoch int64) error {
	args := append(named(key), sql.Named("status", 201), sql.Named("headers", []byte("Content-Type: application/json")),
		sql.Named("body", body), sql.Named("tombstone", false), sql.Named("ttl_ms", 3600000), sql.Named("epoch", epoch))
	r, err := b.complete.ExecContext(ctx, args...)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return fmt.Errorf("complete: %d rows", n)
	}
	return nil
}

func (b *bench) newKey() string {
	return fmt.Sprintf("%s-%d-%d", b.prefix, time.Now().UnixNano(), b.n.Add(1))
}

// cases: what a request costs the store, and the bare statements.
type benchCase struct {
	name string
	fn   func(ctx context.Context, b *bench, i int64) error
}

var cases = []benchCase{
	{"insert", func(ctx context.Context, b *bench, i int64) error {
		_, err := b.insert.ExecContext(ctx, b.newKey(), body)
		return err
	}},
	{"select", func(ctx context.Context, b *bench, i int64) error {
		var got []byte
		return b.sel.QueryRowContext(ctx, fmt.Sprintf("pre-%d", i%replayKeys)).Scan(&got)
	}},
	{"lookup", func(ctx context.Context, b *bench, i int64) error { // a replay
		live, err := b.read(ctx, fmt.Sprintf("replay-%d", i%replayKeys))
		if err == nil && live != -1 {
			err = fmt.Errorf("replay key's live = %d", live)
		}
		return err
	}},
	{"claim", func(ctx context.Context, b *bench, i int64) error { // lookup + acquire
		_, err := b.claim(ctx, b.newKey())
		return err
	}},
	{"claim+complete", func(ctx context.Context, b *bench, i int64) error {
		key := b.newKey()
		epoch, err := b.claim(ctx, key)
		if err != nil {
			return err
		}
		return b.done(ctx, key, epoch)
	}},
	{"tx", func(ctx context.Context, b *bench, i int64) error { // BeginClaim: lookup, BEGIN IMMEDIATE, acquire, complete, COMMIT
		key := b.newKey()
		if _, err := b.read(ctx, key); err != sql.ErrNoRows {
			return fmt.Errorf("lookup of a new key: %v", err)
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		args := append(named(key), sql.Named("fingerprint", finger), sql.Named("fingerprint_version", 1),
			sql.Named("lease_ms", 60000), sql.Named("ttl_ms", 3600000))
		var epoch int64
		if err := tx.StmtContext(ctx, b.acquire).QueryRowContext(ctx, args...).Scan(&epoch); err != nil {
			return err
		}
		args = append(named(key), sql.Named("status", 201), sql.Named("headers", []byte("Content-Type: application/json")),
			sql.Named("body", body), sql.Named("tombstone", false), sql.Named("ttl_ms", 3600000), sql.Named("epoch", epoch))
		if _, err := tx.StmtContext(ctx, b.complete).ExecContext(ctx, args...); err != nil {
			return err
		}
		return tx.Commit()
	}},
}

func phase(ctx context.Context, b *bench, clients int, d time.Duration, fn func(context.Context, *bench, int64) error) (int64, time.Duration, error) {
	var n, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	stop := start.Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := fn(ctx, b, n.Add(1)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), time.Since(start), first
}

func run(tmpl, dir string, rounds int, slice time.Duration, clients int) error {
	ctx := context.Background()
	schema, err := os.ReadFile(filepath.Join(tmpl, "idemgen_schema.sql"))
	if err != nil {
		return err
	}
	q, err := queries(filepath.Join(tmpl, "idemgen_queries.sql"))
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tput"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	benches := map[string]*bench{}
	for _, d := range drivers {
		b, err := open(ctx, d, filepath.Join(dir, d+".db"), string(schema), q, clients)
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		defer b.db.Close()
		var version, mode string
		var syncMode, busy int64
		for _, s := range []struct {
			q string
			p any
		}{{"SELECT sqlite_version()", &version}, {"PRAGMA journal_mode", &mode}, {"PRAGMA synchronous", &syncMode}, {"PRAGMA busy_timeout", &busy}} {
			if err := b.db.QueryRowContext(ctx, s.q).Scan(s.p); err != nil {
				return fmt.Errorf("%s: %s: %w", d, s.q, err)
			}
		}
		fmt.Printf("# %s: SQLite %s, journal_mode %s, synchronous %d, busy_timeout %d\n", d, version, mode, syncMode, busy)
		benches[d] = b
	}
	rates := map[string][]float64{} // case/driver -> per-round ops/s
	for r := range rounds {
		order := drivers
		if r%2 == 1 {
			order = []string{drivers[1], drivers[0]}
		}
		for _, c := range cases {
			for _, d := range order {
				n, el, err := phase(ctx, benches[d], clients, slice, c.fn)
				if err != nil {
					return fmt.Errorf("%s %s: %w", d, c.name, err)
				}
				rates[c.name+"/"+d] = append(rates[c.name+"/"+d], float64(n)/el.Seconds())
			}
		}
	}
	fmt.Printf("%-16s %-8s %10s %10s %10s   %s\n", "case", "driver", "median/s", "min/s", "max/s", "ncruces/modernc (median of rounds)")
	for _, c := range cases {
		m, nc := rates[c.name+"/sqlite"], rates[c.name+"/sqlite3"]
		ratios := make([]float64, len(m))
		for i := range m {
			ratios[i] = nc[i] / m[i]
		}
		for _, d := range drivers {
			v := slices.Sorted(slices.Values(rates[c.name+"/"+d]))
			name := map[string]string{"sqlite": "modernc", "sqlite3": "ncruces"}[d]
			extra := ""
			if d == "sqlite3" {
				rs := slices.Sorted(slices.Values(ratios))
				extra = fmt.Sprintf("%.2f (%.2f-%.2f)", rs[len(rs)/2], rs[0], rs[len(rs)-1])
			}
			fmt.Printf("%-16s %-8s %10.0f %10.0f %10.0f   %s\n", c.name, name, v[len(v)/2], v[0], v[len(v)-1], extra)
		}
	}
	return nil
}
