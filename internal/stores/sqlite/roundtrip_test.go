package sqlite

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestRoundTrips pins the statements of docs/stores.md's round-trip table
// on SQLite, through the wrapper and a traced driver: a first request is
// the read, the claim and the completion; a replay and a conflict the read.
// In transactional mode a first request is the read, BEGIN, the claim, the
// completion and one COMMIT; a duplicate of an attempt still in its
// transaction waits at BEGIN for the write lock until the store bound ends
// (409); a retry after a crash is a first request.
func TestRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name          string
		transactional bool
		want          harness.RoundTripWant
	}{
		{"NonTransactional", false, harness.RoundTripWant{
			First: []string{"Lookup", "Acquire", "Complete"}, Replay: []string{"Lookup"},
			Conflict: []string{"Lookup"}, Takeover: []string{"Lookup", "Acquire", "Complete"},
		}},
		{"Transactional", true, harness.RoundTripWant{
			First: []string{"Lookup", "begin", "Acquire", "Complete", "commit"}, Replay: []string{"Lookup"},
			Conflict: []string{"Lookup", "begin"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newTestDB(t)
			plain, err := sql.Open("sqlite", db.dsn())
			if err != nil {
				t.Fatal(err)
			}
			plain.Close()
			log := &harness.StatementLog{}
			conn := harness.TracedDB(plain.Driver(), db.dsn(), log)
			t.Cleanup(func() { conn.Close() })
			st, err := NewStore(context.Background(), conn)
			if err != nil {
				t.Fatal(err)
			}
			harness.RoundTrips(t, st, log.Take, tc.transactional, tc.want)
		})
	}
}
