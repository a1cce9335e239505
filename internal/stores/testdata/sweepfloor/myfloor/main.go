// Command myfloor measures what MySQL or MariaDB itself allows the sweepers,
// with raw SQL and without idemgen's store: it creates a database of its own
// with the store's schema (internal/stores/mysql/idemgen_schema.sql), fills
// idempotency_keys with -rows expired records, and empties it with one
// client and then with -clients at once, -reps times alternately, printing
// the deleted rows per second of each and their ratio. It is under testdata
// so that ./... does not build it; run it with floor_my.sh.
//
// A batch is, with -mode tx (the default), what the store's Sweep sends: a
// READ COMMITTED transaction (SET TRANSACTION ISOLATION LEVEL, START
// TRANSACTION), the prepared SELECT ... FOR UPDATE SKIP LOCKED of up to
// -batch primary keys in sweep_at order, a DELETE joining those keys (in
// statements of up to 500) to the primary key, COMMIT. With -mode single it
// is SET TRANSACTION ISOLATION LEVEL READ COMMITTED and one autocommitted
// DELETE joined to a derived table that locks its keys with SKIP LOCKED:
// two round trips instead of six.
//
// -cpu also measures the server thread's CPU per batch of one client (from
// /proc/<mysqld pid>/task/<TID>/schedstat, TID from the PROCESSLIST: the
// server must run on this machine, MariaDB 10.5 or later) against the wall
// time per batch.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

var (
	dsn     = flag.String("dsn", os.Getenv("IDEMGEN_TEST_MYSQL"), "server DSN (go-sql-driver form)")
	schema  = flag.String("schema", "internal/stores/mysql/idemgen_schema.sql", "the store's schema file")
	rows    = flag.Int("rows", 100000, "expired records per run")
	batch   = flag.Int("batch", 500, "records per batch")
	clients = flag.Int("clients", 4, "concurrent sweepers of the second run")
	reps    = flag.Int("reps", 3, "repetitions of the 1-client and N-client runs")
	mode    = flag.String("mode", "tx", "tx (the store's batch) or single (one DELETE)")
	cpu     = flag.Bool("cpu", false, "measure the server thread's CPU per batch of one client")
)

const now = "(UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)"

// The store's SweepBatch (idemgen_queries.sql).
const lockBatch = "SELECT scope, principal, idem_key FROM idempotency_keys FORCE INDEX (idempotency_keys_sweep_at_idx)\n" +
	"WHERE sweep_at <= " + now + " AND expires_at <= " + now + "\n" +
	"ORDER BY sweep_at\nLIMIT ?\nFOR UPDATE SKIP LOCKED"

// The single statement: the derived table is materialized first, locking
// its rows and skipping those other sweepers hold; the join then deletes
// them by primary key.
const singleDelete = "DELETE t FROM (" + lockBatch + ") AS b STRAIGHT_JOIN idempotency_keys AS t FORCE INDEX (PRIMARY)\n" +
	"ON t.scope = b.scope AND t.principal = b.principal AND t.idem_key = b.idem_key"

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *dsn == "" {
		log.Fatal("set -dsn or IDEMGEN_TEST_MYSQL")
	}
	if *rows%(*batch**clients) != 0 {
		log.Fatalf("-rows must be a multiple of -batch * -clients")
	}
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(*dsn)
	if err != nil {
		log.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		log.Fatal(err)
	}
	var b [4]byte
	rand.Read(b[:])
	name := "sweepfloor_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		log.Fatal(err)
	}
	// log.Fatal and os.Exit skip deferred calls: every exit below drops it.
	fail := func(err error) {
		admin.ExecContext(context.Background(), "DROP DATABASE "+name) //nolint:errcheck
		log.Fatal(err)
	}
	cfg.DBName = name
	cfg.MultiStatements = true
	setup, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fail(err)
	}
	ddl, err := os.ReadFile(filepath.Clean(*schema))
	if err != nil {
		fail(err)
	}
	if _, err := setup.ExecContext(ctx, string(ddl)); err != nil {
		fail(fmt.Errorf("schema: %w", err))
	}
	setup.Close()
	cfg.MultiStatements = false
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(*clients + 2)
	db.SetMaxIdleConns(*clients + 2)
	var version string
	db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version) //nolint:errcheck
	fmt.Printf("# %s myfloor: %s, %d rows, batch %d, mode %s, 1 vs %d clients; load %s\n",
		time.Now().UTC().Format("2006-01-02 15:04:05 UTC"), version, *rows, *batch, *mode, *clients, load())
	code := 0
	if err := run(ctx, db); err != nil {
		log.Print(err)
		code = 1
	}
	db.Close()
	admin.ExecContext(ctx, "DROP DATABASE "+name) //nolint:errcheck
	os.Exit(code)
}

func run(ctx context.Context, db *sql.DB) error {
	for i := 1; i <= *reps; i++ {
		var rates [2]float64
		for j, c := range []int{1, *clients} {
			r, err := sweepRun(ctx, db, c)
			if err != nil {
				return err
			}
			rates[j] = r
		}
		fmt.Printf("rep %d: %d clients / 1 client = %.2fx (load %s)\n", i, *clients, rates[1]/rates[0], load())
	}
	if *cpu {
		return cpuPerBatch(ctx, db)
	}
	return nil
}

// fill empties the table and inserts n records that expired an hour ago,
// a millisecond of sweep_at apart, in sweep_at order.
func fill(ctx context.Context, db *sql.DB, n int) error {
	if _, err := db.ExecContext(ctx, "TRUNCATE idempotency_keys"); err != nil {
		return err
	}
	base := time.Now().UTC().Add(-time.Hour)
	const chunk = 1000
	for start := 0; start < n; start += chunk {
		var q strings.Builder
		q.WriteString("INSERT INTO idempotency_keys (scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch, claim_token, lease_until, expires_at, sweep_at, status, headers, body, tombstone) VALUES ")
		var args []any
		for i := start; i < min(start+chunk, n); i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, 2, 2, ?, ?, ?, ?, ?, 201, '', ?, FALSE)")
			p := sha256.Sum256([]byte("principal-" + strconv.Itoa(i%100)))
			f := sha256.Sum256([]byte("fingerprint-" + strconv.Itoa(i)))
			at := base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02 15:04:05.000000")
			args = append(args, "sweepfloor", p[:], "key-"+strconv.Itoa(i), f[:], i, f[:16],
				base.Add(-time.Hour).Format("2006-01-02 15:04:05.000000"), at, at,
				`{"id":"ch_`+strconv.Itoa(i)+`","amount":100,"currency":"eur"}`)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	_, err := db.ExecContext(ctx, "ANALYZE TABLE idempotency_keys")
	return err
}

// sweepRun fills the table and empties it with c sweepers, each on its own
// connection, and returns the rows deleted per second.
func sweepRun(ctx context.Context, db *sql.DB, c int) (float64, error) {
	if err := fill(ctx, db, *rows); err != nil {
		return 0, fmt.Errorf("fill: %w", err)
	}
	conns := make([]*sweeper, c)
	for i := range conns {
		sw, err := newSweeper(ctx, db)
		if err != nil {
			return 0, err
		}
		defer sw.Close()
		conns[i] = sw
	}
	var wg sync.WaitGroup
	counts := make([]int, c)
	batches := make([]int, c)
	errs := make([]error, c)
	start := time.Now()
	for i, conn := range conns {
		wg.Go(func() {
			for {
				n, err := conn.sweep(ctx, *batch)
				if err != nil {
					errs[i] = err
					return
				}
				counts[i] += n
				batches[i]++
				if n < *batch {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := 0
	for i := range counts {
		if errs[i] != nil {
			return 0, fmt.Errorf("sweeper %d: %w", i, errs[i])
		}
		total += counts[i]
	}
	if total != *rows {
		return 0, fmt.Errorf("%d clients deleted %d rows, want %d", c, total, *rows)
	}
	rate := float64(total) / elapsed.Seconds()
	fmt.Printf("clients=%d deleted=%d wall=%.3fs rows/s=%.0f batches per client %v\n", c, total, elapsed.Seconds(), rate, batches)
	return rate, nil
}

// sweeper is one connection with its prepared statements, as the store's.
type sweeper struct {
	*sql.Conn
	lock, single *sql.Stmt
}

func newSweeper(ctx context.Context, db *sql.DB) (*sweeper, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	sw := &sweeper{Conn: conn}
	if sw.lock, err = conn.PrepareContext(ctx, lockBatch); err == nil {
		sw.single, err = conn.PrepareContext(ctx, singleDelete)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return sw, nil
}

// sweep deletes up to n expired records.
func (conn *sweeper) sweep(ctx context.Context, n int) (int, error) {
	if *mode == "single" {
		if _, err := conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
			return 0, err
		}
		res, err := conn.single.ExecContext(ctx, n)
		if err != nil {
			return 0, err
		}
		m, err := res.RowsAffected()
		return int(m), err
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck
	rs, err := tx.StmtContext(ctx, conn.lock).QueryContext(ctx, n)
	if err != nil {
		return 0, err
	}
	var keys [][]any
	for rs.Next() {
		var s, p, k []byte
		if err := rs.Scan(&s, &p, &k); err != nil {
			rs.Close()
			return 0, err
		}
		keys = append(keys, []any{s, p, k})
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, tx.Commit()
	}
	deleted := 0
	for start := 0; start < len(keys); start += 500 {
		chunk := keys[start:min(start+500, len(keys))]
		var q strings.Builder
		q.WriteString("DELETE t FROM (SELECT CAST(? AS BINARY) AS scope, CAST(? AS BINARY) AS principal, CAST(? AS BINARY) AS idem_key")
		args := make([]any, 0, 3*len(chunk))
		for i, k := range chunk {
			if i > 0 {
				q.WriteString(" UNION ALL SELECT ?, ?, ?")
			}
			args = append(args, k...)
		}
		q.WriteString(") AS b STRAIGHT_JOIN idempotency_keys AS t FORCE INDEX (PRIMARY) ON t.scope = b.scope AND t.principal = b.principal AND t.idem_key = b.idem_key")
		res, err := tx.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return 0, err
		}
		m, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		deleted += int(m)
	}
	return deleted, tx.Commit()
}

// cpuPerBatch sweeps a filled table with one connection and reports the
// CPU its server thread spent per batch against the wall time per batch.
func cpuPerBatch(ctx context.Context, db *sql.DB) error {
	if err := fill(ctx, db, *rows); err != nil {
		return err
	}
	conn, err := newSweeper(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close()
	var tid int
	if err := conn.QueryRowContext(ctx, "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()").Scan(&tid); err != nil {
		return fmt.Errorf("thread id (MariaDB 10.5 or later): %w", err)
	}
	var pid string
	if err := conn.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pid); err != nil {
		return err
	}
	raw, err := os.ReadFile(pid)
	if err != nil {
		return fmt.Errorf("server pid (the server must run here): %w", err)
	}
	stat := fmt.Sprintf("/proc/%s/task/%d/schedstat", strings.TrimSpace(string(raw)), tid)
	if _, err := conn.sweep(ctx, *batch); err != nil { // warm up
		return err
	}
	n := *rows / *batch - 2
	cpu0, err := schedNanos(stat)
	if err != nil {
		return err
	}
	start := time.Now()
	for range n {
		if _, err := conn.sweep(ctx, *batch); err != nil {
			return err
		}
	}
	wall := time.Since(start)
	cpu1, err := schedNanos(stat)
	if err != nil {
		return err
	}
	cpuMs := float64(cpu1-cpu0) / 1e6 / float64(n)
	wallMs := float64(wall.Microseconds()) / 1000 / float64(n)
	fmt.Printf("one client, %d batches of %d: server thread CPU %.2f ms/batch, wall %.2f ms/batch (CPU %.0f%% of wall; the rest is round trips, the commit flush, the client and waiting for a core) (load %s)\n",
		n, *batch, cpuMs, wallMs, 100*cpuMs/wallMs, load())
	return nil
}

func schedNanos(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s: empty", path)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

func load() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
