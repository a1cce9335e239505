package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/storekit/pgkit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgxTrace records every statement a pool runs in a harness.StatementLog.
type pgxTrace struct{ *harness.StatementLog }

// TraceQueryStart records a statement by its name; BeginClaim's begin
// query (BEGIN, then ClaimTx, one round trip) as "begin+ClaimTx".
func (l pgxTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, pgkit.ClaimTxBegin) {
		l.Record("begin+ClaimTx")
		return ctx
	}
	l.Add(d.SQL)
	return ctx
}

func (pgxTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch (one round trip) as its statements'
// names joined by "+".
func (l pgxTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var one harness.StatementLog
	for _, q := range d.Batch.QueuedQueries {
		one.Add(q.SQL)
	}
	l.Record(strings.Join(one.Take(), "+"))
	return ctx
}

func (pgxTrace) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (pgxTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// firstRoundTrips and firstRoundTripsTx are the round trips of a first
// request, non-transactional and transactional (a batch's statements joined
// by "+"): TestRoundTrips pins them, and TestPgbenchScripts writes the
// pgbench scripts of docs/performance-log.md from them, so that the scripts
// send what the store sends.
var (
	firstRoundTrips   = []string{"Claim", "Complete"}
	firstRoundTripsTx = []string{"begin+ClaimTx", "CompleteTx+commit"}
)

// TestRoundTrips pins what docs/stores.md promises, through the wrapper: a
// first request is the claim (which reads and claims in one statement) and
// the completion; a replay and a conflict that same statement alone; a
// takeover of an abandoned record as many as a first request. In
// transactional mode a first request is BEGIN with the claim (uncommitted)
// in one round trip, and the completion with the COMMIT in one round trip
// (a batch); a replay, a conflict with a committed record and a reused key
// are BEGIN with the claim, which finds the record live, then the ROLLBACK
// with the read of the record; a conflict with an attempt still in its
// transaction BEGIN with the claim, which finds the key's advisory lock
// taken, then the ROLLBACK with the read of the holder's lease
// (HolderLease, for Retry-After); a retry after a crash is a first
// request, since the crash left nothing.
func TestRoundTrips(t *testing.T) {
	harness.RoundTrips(t, func(t *testing.T, log *harness.StatementLog) idemrt.Store {
		db := newTestDB(t)
		pool := db.pool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = pgxTrace{log} })
		st, err := NewStore(context.Background(), pool)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, harness.RoundTripWant{
		First: firstRoundTrips, Replay: []string{"Claim"},
		Conflict: []string{"Claim"}, Takeover: []string{"Claim", "Complete"},
		Mismatch: []string{"Claim"}, Unsaved: []string{"Claim", "Release"},
	}, harness.RoundTripWant{
		First: firstRoundTripsTx, Replay: []string{"begin+ClaimTx", "rollback+Lookup"},
		Conflict: []string{"begin+ClaimTx", "rollback+HolderLease"},
		Mismatch: []string{"begin+ClaimTx", "rollback+Lookup"}, Unsaved: []string{"begin+ClaimTx", "rollback"},
	})
}
