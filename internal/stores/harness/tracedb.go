package harness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// StatementLog records the statements a database runs, in order: sqlc's
// "-- name: X" for the store's, the first word (lower case) for the rest:
// begin, commit, rollback, insert.
type StatementLog struct {
	mu    sync.Mutex
	names []string
}

// Add records the statement sql.
func (l *StatementLog) Add(sql string) {
	name, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(sql)), " ")
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name, _, _ = strings.Cut(rest, " ")
	}
	l.add(name)
}

// Record records a name as it is (e.g. a batch of statements, one round
// trip).
func (l *StatementLog) Record(name string) { l.add(name) }

func (l *StatementLog) add(name string) {
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

// Take returns the statements recorded since the last Take.
func (l *StatementLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// TracedDB opens a database/sql handle on d and dsn whose statements,
// prepared or not, and transactions are recorded in log: one entry per
// round trip the application asks for (Exec or Query of a statement,
// BEGIN, COMMIT, ROLLBACK; preparing is not counted, since the stores
// prepare once, at NewStore).
func TracedDB(d driver.Driver, dsn string, log *StatementLog) *sql.DB {
	return sql.OpenDB(&tracedConnector{d: d, dsn: dsn, log: log})
}

type tracedConnector struct {
	d   driver.Driver
	dsn string
	log *StatementLog
}

func (c *tracedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var conn driver.Conn
	var err error
	if dc, ok := c.d.(driver.DriverContext); ok {
		var conr driver.Connector
		if conr, err = dc.OpenConnector(c.dsn); err != nil {
			return nil, err
		}
		conn, err = conr.Connect(ctx)
	} else {
		conn, err = c.d.Open(c.dsn)
	}
	if err != nil {
		return nil, err
	}
	return &tracedConn{c: conn, log: c.log}, nil
}

func (c *tracedConnector) Driver() driver.Driver { return c.d }

type tracedConn struct {
	c   driver.Conn
	log *StatementLog
}

func (c *tracedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *tracedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := c.c.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.c.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &tracedStmt{s: st, query: query, log: c.log}, nil
}

func (c *tracedConn) Close() error { return c.c.Close() }

func (c *tracedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *tracedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.log.add("begin")
	var tx driver.Tx
	var err error
	if b, ok := c.c.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 a wrapper forwards to the old method when the driver has no BeginTx
		tx, err = c.c.Begin()
	}
	if err != nil {
		return nil, err
	}
	return &tracedTx{tx: tx, log: c.log}, nil
}

func (c *tracedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *tracedConn) IsValid() bool {
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type tracedTx struct {
	tx  driver.Tx
	log *StatementLog
}

func (t *tracedTx) Commit() error {
	t.log.add("commit")
	return t.tx.Commit()
}

func (t *tracedTx) Rollback() error {
	t.log.add("rollback")
	return t.tx.Rollback()
}

type tracedStmt struct {
	s     driver.Stmt
	query string
	log   *StatementLog
}

func (s *tracedStmt) Close() error  { return s.s.Close() }
func (s *tracedStmt) NumInput() int { return s.s.NumInput() }

// Exec and Query complete driver.Stmt; database/sql calls ExecContext and
// QueryContext instead.
func (s *tracedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *tracedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *tracedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.log.Add(s.query)
	if e, ok := s.s.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	//lint:ignore SA1019 a wrapper forwards to the old method when the driver has no ExecContext
	return s.s.Exec(values(args))
}

func (s *tracedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.log.Add(s.query)
	if q, ok := s.s.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	//lint:ignore SA1019 a wrapper forwards to the old method when the driver has no QueryContext
	return s.s.Query(values(args))
}

// named numbers positional arguments from 1, as database/sql does.
func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

// RoundTripWant is the statements (StatementLog names) of each request of
// RoundTrips.
type RoundTripWant struct {
	// First is a first request, and in transactional mode also a retry
	// after a crash (which left nothing).
	First, Replay []string
	// Conflict is a duplicate while the first attempt is in its handler.
	Conflict []string
	// Takeover is a request after an abandoned committed claim's lease
	// ended (not transactional).
	Takeover []string
	// Mismatch is a request that reuses a completed key with another body
	// (422).
	Mismatch []string
	// Unsaved is a first request whose handler answers 500, which is not
	// saved: the claim is released (or, transactional, rolled back). The
	// next request with its key is a first request again (First).
	Unsaved []string
}

// RoundTrips pins the statements each request makes through the wrapper
// (docs/stores.md, Round trips), in subtests NonTransactional and
// Transactional: each runs on a store that open makes over a fresh
// database whose statements go to log.
func RoundTrips(t *testing.T, open func(t *testing.T, log *StatementLog) idemrt.Store, nonTransactional, transactional RoundTripWant) {
	for _, tc := range []struct {
		name          string
		transactional bool
		want          RoundTripWant
	}{
		{"NonTransactional", false, nonTransactional},
		{"Transactional", true, transactional},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &StatementLog{}
			roundTrips(t, open(t, log), log.Take, tc.transactional, tc.want)
		})
	}
}

// roundTrips is one mode of RoundTrips over st: take returns what the
// store's database ran since it was last called.
func roundTrips(t *testing.T, st idemrt.Store, take func() []string, transactional bool, want RoundTripWant) {
	release := make(chan struct{})
	slow := make(chan struct{}, 1)
	// The lease (and the store bound, half of it) leave room for -race
	// on a busy machine; a conflict that waits on a lock waits the bound.
	const lease = Lease
	h, err := idemrt.Wrap(idemrt.Options{Store: st}, &idemrt.Policy{
		OperationID: "createCharge", Method: http.MethodPost, Route: "/charges",
		Key: idemrt.KeyFromHeader, KeyName: "Idempotency-Key", Principal: idemrt.PrincipalAnonymous,
		Lease: lease, TTL: time.Hour, Transactional: transactional,
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			slow <- struct{}{}
			<-release
		}
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if err != nil {
		t.Fatal(err)
	}
	send := func(key string, header http.Header) int {
		body := `{}`
		if b := header.Get("X-Body"); b != "" {
			body = b
		}
		r, _ := http.NewRequest(http.MethodPost, "http://api.test/charges", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		for k, v := range header {
			r.Header[k] = v
		}
		var w DiscardWriter
		h.ServeHTTP(&w, r)
		return w.Code
	}
	expect := func(what string, code, wantCode int, want []string) {
		t.Helper()
		got := take()
		if code != wantCode || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: status %d, statements %v; want %d and %v", what, code, got, wantCode, want)
		}
	}
	take() // NewStore's own
	key, busy, abandoned := UniqueKey(t, "rt"), UniqueKey(t, "rt-busy"), UniqueKey(t, "rt-abandoned")
	expect("first request", send(key, nil), http.StatusCreated, want.First)
	expect("replay", send(key, nil), http.StatusCreated, want.Replay)
	expect("mismatch", send(key, http.Header{"X-Body": {`{"other":1}`}}), http.StatusUnprocessableEntity, want.Mismatch)
	failed := UniqueKey(t, "rt-failed")
	expect("unsaved answer", send(failed, http.Header{"X-Fail": {"1"}}), http.StatusInternalServerError, want.Unsaved)
	expect("retry after an unsaved answer", send(failed, nil), http.StatusCreated, want.First)

	done := make(chan int)
	go func() { done <- send(busy, http.Header{"X-Slow": {"1"}}) }()
	<-slow
	take()
	code := send(busy, nil)
	// A driver may roll back a transaction whose context ended from its
	// own goroutine: let it finish before counting.
	time.Sleep(100 * time.Millisecond)
	expect("conflict", code, http.StatusConflict, want.Conflict)
	close(release)
	<-done
	take()

	req := idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: abandoned}, Lease: lease, TTL: time.Hour}
	if transactional {
		// An attempt whose process died in its handler: its transaction
		// is gone with it, and the next request is a first request.
		tx, res, err := st.(idemrt.ClaimTxStore).BeginClaim(context.Background(), req)
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		tx.Rollback(context.Background())
		take()
		expect("retry after a crash", send(abandoned, nil), http.StatusCreated, want.First)
		return
	}
	// An attempt that never completes (its process died): after the lease
	// the next request takes the record over.
	if res, err := st.Claim(context.Background(), req); err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	time.Sleep(lease + 150*time.Millisecond)
	take()
	expect("takeover", send(abandoned, nil), http.StatusCreated, want.Takeover)
}
