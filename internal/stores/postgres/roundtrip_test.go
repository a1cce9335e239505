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
	name := "?"
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
		Lease: 300 * time.Millisecond, TTL: time.Hour,
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
	expect("first request", send(key, nil), 201, "Lookup", "Acquire", "Complete")
	expect("replay", send(key, nil), 201, "Lookup")

	busy := harness.UniqueKey(t, "rt")
	done := make(chan int)
	go func() { done <- send(busy, http.Header{"X-Slow": {"1"}}) }()
	<-slow
	log.take()
	expect("conflict", send(busy, nil), 409, "Lookup")
	close(release)
	<-done
	log.take()

	// An attempt that never completes (its process died): after the lease
	// the next request takes the record over.
	abandoned := harness.UniqueKey(t, "rt")
	if res, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: abandoned}, Lease: 300 * time.Millisecond, TTL: time.Hour}); err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	time.Sleep(450 * time.Millisecond)
	log.take()
	expect("takeover", send(abandoned, nil), 201, "Lookup", "Acquire", "Complete")
}
