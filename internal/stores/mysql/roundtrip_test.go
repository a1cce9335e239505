package mysql

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestRoundTrips pins the statements of docs/stores.md's round-trip table
// on MySQL/MariaDB, through the wrapper and a traced driver: a first
// request is the read, the claim and the completion; a replay and a
// conflict the read. In transactional mode a first request is the read,
// BEGIN, the claim, the completion and one COMMIT; a duplicate of an
// attempt still in its transaction waits in its claim on the uncommitted
// row until the store bound ends, then rolls back (409); a retry after a
// crash is a first request.
func TestRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name          string
		transactional bool
		want          harness.RoundTripWant
	}{
		{"NonTransactional", false, harness.RoundTripWant{
			First: []string{"Lookup", "Claim", "Complete"}, Replay: []string{"Lookup"},
			Conflict: []string{"Lookup"}, Takeover: []string{"Lookup", "Claim", "Complete"},
		}},
		{"Transactional", true, harness.RoundTripWant{
			First: []string{"Lookup", "begin", "Claim", "Complete", "commit"}, Replay: []string{"Lookup"},
			Conflict: []string{"Lookup", "begin", "Claim", "rollback"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newTestDB(t)
			log := &harness.StatementLog{}
			conn := harness.TracedDB(&mysql.MySQLDriver{}, db.cfg.FormatDSN(), log)
			t.Cleanup(func() { conn.Close() })
			st, err := NewStore(context.Background(), conn)
			if err != nil {
				t.Fatal(err)
			}
			harness.RoundTrips(t, st, log.Take, tc.transactional, tc.want)
		})
	}
}
