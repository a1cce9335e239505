package postgres

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkHTTPFloor measures, through BenchmarkHTTP's server and clients,
// the floors of a first request (BenchFloors, harness.StoreFloors) against
// the bare INSERT handler, with BenchmarkHTTP's newkey and newkey-tx (the
// same handler through the wrapper) in the same rounds
// (docs/performance-log.md).
//
//	go test ./internal/stores/postgres -run '^$' -bench HTTPFloor -benchtime 1x -count 3
func BenchmarkHTTPFloor(b *testing.B) {
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
	floors, err := BenchFloors(pool)
	if err != nil {
		b.Fatal(err)
	}
	harness.HTTPFloors(b, hb, floors)
}
