package mysql

import (
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkSweepers: one sweeper, then four (each on its own connection
// pool, as on four servers), empty a table of 20000 expired records in
// batches of 500:
//
//	go test ./internal/stores/mysql -run '^$' -bench Sweepers -benchtime 1x -count 3
func BenchmarkSweepers(b *testing.B) {
	db := newTestDB(b)
	var stores []idemrt.Store
	for range 4 {
		stores = append(stores, db.backend(b, nil).Store)
	}
	harness.SweepThroughput(b, stores, 20000, 500)
}
