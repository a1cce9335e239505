package sqlite

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestRoundTrips pins the statements of docs/stores.md's round-trip table
// on SQLite, through the wrapper and a traced driver: a first request is
// the read, the claim and the completion; a replay and a conflict the read.
// In transactional mode a first request is the read, BEGIN, the claim, the
// completion and one COMMIT; a duplicate of an attempt still in its
// transaction waits for the store's write turn, before BEGIN, until the
// store bound ends (409), so it runs the read only; a retry after a crash
// is a first request.
func TestRoundTrips(t *testing.T) {
	harness.RoundTrips(t, func(t *testing.T, log *harness.StatementLog) idemrt.Store {
		db := newTestDB(t)
		plain, err := sql.Open("sqlite", db.dsn())
		if err != nil {
			t.Fatal(err)
		}
		plain.Close()
		conn := harness.TracedDB(plain.Driver(), db.dsn(), log)
		t.Cleanup(func() { conn.Close() })
		st, err := NewStore(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, harness.RoundTripWant{
		First: []string{"Lookup", "Acquire", "Complete"}, Replay: []string{"Lookup"},
		Conflict: []string{"Lookup"}, Takeover: []string{"Lookup", "Acquire", "Complete"},
		Mismatch: []string{"Lookup"}, Unsaved: []string{"Lookup", "Acquire", "Release"},
	}, harness.RoundTripWant{
		First: []string{"Lookup", "begin", "Acquire", "Complete", "commit"}, Replay: []string{"Lookup"},
		Conflict: []string{"Lookup"},
		Mismatch: []string{"Lookup"}, Unsaved: []string{"Lookup", "begin", "Acquire", "rollback"},
	})
}
