package mysql

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// BenchmarkHTTP measures what users pay, through a real net/http server on
// 127.0.0.1 with 16 clients (see harness.HTTPRatios); a pool of 16
// connections.
//
//	go test ./internal/stores/mysql -run '^$' -bench HTTP -benchtime 1x -count 3
func BenchmarkHTTP(b *testing.B) {
	db := newTestDB(b)
	conn := db.open(b, nil)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	st, err := NewStore(context.Background(), conn)
	if err != nil {
		b.Fatal(err)
	}
	harness.HTTPRatios(b, harness.SQLHTTPBackend(b, st, conn, TxFromContext, "VARBINARY(255)", "BLOB"))
}
