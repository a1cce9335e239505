package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestNewStoreRefusesTableWithoutUniqueKey: NewStore refuses a key table,
// consumer table or outbox without the unique index its statements rely
// on, naming the table and the statement that adds the index. Without the
// key table's or the consumer table's, preparing the statements already
// failed, with SQLite's "ON CONFLICT clause does not match any PRIMARY KEY
// or UNIQUE constraint", which names neither; but the key table with a
// NOCASE index (under which 'K' and 'k' are one key) and the outbox
// without its index on event_id (AddEvents then accepts an id twice)
// started. A unique index in another column order is as good as the
// primary key.
func TestNewStoreRefusesTableWithoutUniqueKey(t *testing.T) {
	ctx := context.Background()
	conn := newTestDB(t).open(t)
	const (
		keys      = "the table idempotency_keys has no PRIMARY KEY or UNIQUE index on exactly (scope, principal, idem_key)"
		processed = "the table idempotency_keys_processed has no PRIMARY KEY or UNIQUE index on exactly (consumer, message_id)"
		outbox    = "the table idempotency_keys_outbox has no PRIMARY KEY or UNIQUE index on exactly (event_id)"
	)
	// CREATE TABLE ... AS SELECT copies the columns, not the constraints.
	withoutKey := func(table string) string {
		return "CREATE TABLE copy AS SELECT * FROM " + table + "; DROP TABLE " + table + "; ALTER TABLE copy RENAME TO " + table
	}
	for _, step := range []struct {
		sql, refused string // refused: part of NewStore's error, "" if it starts
	}{
		{withoutKey("idempotency_keys"), keys},
		{"CREATE UNIQUE INDEX k_partial ON idempotency_keys (scope, principal, idem_key) WHERE state <> 3", keys},
		{"DROP INDEX k_partial; CREATE UNIQUE INDEX k_wider ON idempotency_keys (scope, principal, idem_key, epoch)", keys},
		{"DROP INDEX k_wider; CREATE UNIQUE INDEX k_nocase ON idempotency_keys (scope, principal, idem_key COLLATE NOCASE)", keys},
		{"DROP INDEX k_nocase; CREATE UNIQUE INDEX k_expr ON idempotency_keys (scope, principal, lower(idem_key))", keys},
		{"DROP INDEX k_expr; CREATE UNIQUE INDEX k_by_key ON idempotency_keys (idem_key, scope, principal)", ""},
		{withoutKey("idempotency_keys_processed"), processed},
		{"CREATE UNIQUE INDEX p_by_id ON idempotency_keys_processed (message_id, consumer)", ""},
		{"DROP INDEX idempotency_keys_outbox_id", outbox},
		{"CREATE UNIQUE INDEX idempotency_keys_outbox_id ON idempotency_keys_outbox (event_id)", ""},
		{"DROP TABLE idempotency_keys_outbox", "the table idempotency_keys_outbox does not exist"},
	} {
		if _, err := conn.ExecContext(ctx, step.sql); err != nil {
			t.Fatalf("%s: %v", step.sql, err)
		}
		st, err := NewStore(ctx, conn)
		switch {
		case step.refused == "" && err != nil:
			t.Errorf("after %s: NewStore: %v, want a store", step.sql, err)
		case step.refused != "" && (err == nil || !strings.Contains(err.Error(), step.refused)):
			t.Errorf("after %s: NewStore: %v, want a refusal with %q", step.sql, err, step.refused)
		}
		if st != nil {
			st.Close()
		}
	}
}
