package postgres

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementLog records the name of every statement a pool runs (sqlc's
// "-- name: X" comment), in order.
type statementLog struct {
	mu    sync.Mutex
	names []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	// Statements without a name are pgx's own: begin, commit, rollback.
	name, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(d.SQL)), " ")
	if rest, ok := strings.CutPrefix(d.SQL, "-- name: "); ok {
		name, _, _ = strings.Cut(rest, " ")
	}
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// TestRoundTrips pins what docs/stores.md promises: through the wrapper, a
// first request runs three statements (a plain read, the claim and the
// completion), a replay and a conflict one plain read each, and a takeover
// of an abandoned record as many as a first request.
func TestRoundTrips(t *testing.T) {
	t.Run("NonTransactional", func(t *testing.T) { testRoundTrips(t, false) })
	t.Run("Transactional", func(t *testing.T) { testRoundTrips(t, true) })
}

// In transactional mode a first request is a plain read, then BEGIN, the
// claim (uncommitted), the handler's statements, the completion and one
// COMMIT; a replay is the plain read; a conflict with an attempt still in
// its transaction is the read and a claim that finds the key's advisory
// lock taken (then ROLLBACK); and a retry after a crash is a first request,
// since the crash left nothing.
func testRoundTrips(t *testing.T, transactional bool) {
	db := newTestDB(t)
	log := &statementLog{}
	pool := db.pool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = log })
	st, err := NewStore(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	slow := make(chan struct{}, 1)
	h, err := idemrt.Wrap(idemrt.Options{Store: st}, &idemrt.Policy{
		OperationID: "createCharge", Method: http.MethodPost, Route: "/charges",
		Key: idemrt.KeyFromHeader, KeyName: "Idempotency-Key", Principal: idemrt.PrincipalAnonymous,
		Lease: 300 * time.Millisecond, TTL: time.Hour, Transactional: transactional,
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			slow <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if err != nil {
		t.Fatal(err)
	}
	send := func(key string, header http.Header) int {
		r, _ := http.NewRequest(http.MethodPost, "http://api.test/charges", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		for k, v := range header {
			r.Header[k] = v
		}
		var w harness.DiscardWriter
		h.ServeHTTP(&w, r)
		return w.Code
	}
	expect := func(what string, code, wantCode int, want ...string) {
		t.Helper()
		got := log.take()
		if code != wantCode || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: status %d, statements %v; want %d and %v", what, code, got, wantCode, want)
		}
	}
	log.take() // NewStore's own
	key := harness.UniqueKey(t, "rt")
	busy := harness.UniqueKey(t, "rt")
	abandoned := harness.UniqueKey(t, "rt")
	first := []string{"Lookup", "Acquire", "Complete"}
	conflict := []string{"Lookup"}
	if transactional {
		first = []string{"Lookup", "begin", "ClaimTx", "Complete", "commit"}
		conflict = []string{"Lookup", "begin", "ClaimTx", "rollback"}
	}
	expect("first request", send(key, nil), 201, first...)
	expect("replay", send(key, nil), 201, "Lookup")

	done := make(chan int)
	go func() { done <- send(busy, http.Header{"X-Slow": {"1"}}) }()
	<-slow
	log.take()
	expect("conflict", send(busy, nil), 409, conflict...)
	close(release)
	<-done
	log.take()

	if transactional {
		// An attempt whose process died in its handler: its transaction
		// is gone with it, and the next request is a first request.
		tx, res, err := st.BeginClaim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: abandoned}, Lease: 300 * time.Millisecond, TTL: time.Hour})
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		tx.Rollback(context.Background())
		log.take()
		expect("retry after a crash", send(abandoned, nil), 201, first...)
		return
	}
	// An attempt that never completes (its process died): after the lease
	// the next request takes the record over.
	if res, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: abandoned}, Lease: 300 * time.Millisecond, TTL: time.Hour}); err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	time.Sleep(450 * time.Millisecond)
	log.take()
	expect("takeover", send(abandoned, nil), 201, first...)
}
