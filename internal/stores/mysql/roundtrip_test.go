package mysql

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
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
	harness.RoundTrips(t, func(t *testing.T, log *harness.StatementLog) idemrt.Store {
		db := newTestDB(t)
		conn := harness.TracedDB(&mysql.MySQLDriver{}, db.cfg.FormatDSN(), log)
		t.Cleanup(func() { conn.Close() })
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, harness.RoundTripWant{
		First: []string{"Lookup", "Claim", "Complete"}, Replay: []string{"Lookup"},
		Conflict: []string{"Lookup"}, Takeover: []string{"Lookup", "Claim", "Complete"},
		Mismatch: []string{"Lookup"}, Unsaved: []string{"Lookup", "Claim", "Release"},
	}, harness.RoundTripWant{
		First: []string{"Lookup", "begin", "Claim", "Complete", "commit"}, Replay: []string{"Lookup"},
		Conflict: []string{"Lookup", "begin", "Claim", "rollback"},
		Mismatch: []string{"Lookup"}, Unsaved: []string{"Lookup", "begin", "Claim", "rollback"},
	})
}
