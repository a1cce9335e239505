package mysql

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
)

// BenchmarkLookupProtocol compares the store's Lookup of a completed key
// sent two ways on one connection each: as the store sends it, a statement
// prepared on the server once and executed with the binary protocol
// (COM_STMT_EXECUTE: one round trip, the plan kept), and as a query the
// driver interpolates (interpolateParams=true: COM_QUERY, one round trip,
// parsed and planned by the server each time). Without interpolateParams an
// unprepared query with arguments costs three round trips (prepare,
// execute, close). claim-live is the prepared claim (the upsert) of the
// same completed keys, which changes nothing: what a replay would pay on
// top of its read if the claim came first. Run the sub-benchmarks
// alternately, e.g.
//
//	go test ./internal/stores/mysql -run '^$' -bench LookupProtocol -benchtime 3000x -count 5
func BenchmarkLookupProtocol(b *testing.B) {
	ctx := context.Background()
	db := newTestDB(b)
	st := db.store(b)
	const rows = 1000
	params := make([]sqlcLookupParams, rows)
	claims := make([]sqlcClaimParams, rows)
	for i, req := range harness.CompletedKeys(b, ctx, st, rows, []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)) {
		params[i] = sqlcLookupParams{Scope: []byte(req.Scope), Principal: req.PrincipalHash[:], IdemKey: []byte(req.Key)}
		claims[i] = sqlcClaimParams{
			Scope: params[i].Scope, Principal: params[i].Principal, IdemKey: params[i].IdemKey,
			Fingerprint: req.Fingerprint[:], ClaimToken: make([]byte, 16), LeaseUs: 60e6, TtlUs: 3600e6,
		}
	}
	prepConn := db.open(b, nil)
	prepConn.SetMaxOpenConns(1)
	prepared, err := sqlcPrepare(ctx, prepConn)
	if err != nil {
		b.Fatal(err)
	}
	defer prepared.Close()
	interpConn := db.open(b, func(c *mysql.Config) { c.InterpolateParams = true })
	interpConn.SetMaxOpenConns(1)
	interpolated := sqlcNew(interpConn)
	b.Run("claim-live", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			res, err := prepared.Claim(ctx, claims[i%rows])
			if err != nil {
				b.Fatal(err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 0 {
				b.Fatalf("the claim of a live record changed %d rows (%v)", n, err)
			}
		}
	})
	for _, c := range []struct {
		name string
		q    *sqlcQueries
	}{{"prepared", prepared}, {"interpolated", interpolated}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				row, err := c.q.Lookup(ctx, params[i%rows])
				if err != nil || len(row.Body) == 0 {
					b.Fatal(row, err)
				}
			}
		})
	}
}
