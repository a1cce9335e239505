package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestNewStoreRefusesTableWithoutUniqueKey: NewStore refuses a key table,
// consumer table or outbox without the unique index its statements rely
// on, naming the table and the statement that adds the index. Without it
// the service started and looked healthy, and then every claim (or
// ProcessOnce) failed with a 503 (ON CONFLICT finds no arbiter index), or
// AddEvents accepted an event id twice; an index with a nondeterministic
// collation made 'K' and 'k' one key. A unique index in another column
// order, with INCLUDE columns, is as good as the primary key.
func TestNewStoreRefusesTableWithoutUniqueKey(t *testing.T) {
	ctx := context.Background()
	pool := newTestDB(t).pool(t, nil)
	const (
		keys      = "the table idempotency_keys has no PRIMARY KEY or UNIQUE index on exactly (scope, principal, idem_key)"
		processed = "the table idempotency_keys_processed has no PRIMARY KEY or UNIQUE index on exactly (consumer, message_id)"
		outbox    = "the table idempotency_keys_outbox has no PRIMARY KEY or UNIQUE index on exactly (event_id)"
	)
	for _, step := range []struct {
		sql, refused string // refused: part of NewStore's error, "" if it starts
		sqlFails     bool   // the statement itself fails (and leaves an invalid index)
	}{
		{sql: "ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey", refused: keys},
		{sql: "CREATE UNIQUE INDEX k_partial ON idempotency_keys (scope, principal, idem_key) WHERE state <> 3", refused: keys},
		{sql: "DROP INDEX k_partial; CREATE UNIQUE INDEX k_wider ON idempotency_keys (scope, principal, idem_key, epoch)", refused: keys},
		{sql: "DROP INDEX k_wider; ALTER TABLE idempotency_keys ADD CONSTRAINT k_deferrable PRIMARY KEY (scope, principal, idem_key) DEFERRABLE", refused: keys},
		{sql: "ALTER TABLE idempotency_keys DROP CONSTRAINT k_deferrable; " +
			"CREATE COLLATION caseless (provider = icu, locale = 'und-u-ks-level2', deterministic = false); " +
			"CREATE UNIQUE INDEX k_caseless ON idempotency_keys (scope, principal, idem_key COLLATE caseless)", refused: keys},
		{sql: "DROP INDEX k_caseless; CREATE UNIQUE INDEX k_by_key ON idempotency_keys (idem_key, scope, principal) INCLUDE (epoch)"},
		{sql: "ALTER TABLE idempotency_keys_processed DROP CONSTRAINT idempotency_keys_processed_pkey", refused: processed},
		// A CREATE INDEX CONCURRENTLY that failed on duplicates leaves an
		// invalid index behind, which ON CONFLICT does not use.
		{sql: "INSERT INTO idempotency_keys_processed (consumer, message_id) VALUES ('\\x01', '\\x02'), ('\\x01', '\\x02')", refused: processed},
		{sql: "CREATE UNIQUE INDEX CONCURRENTLY p_failed ON idempotency_keys_processed (consumer, message_id)", refused: processed, sqlFails: true},
		{sql: "DELETE FROM idempotency_keys_processed; DROP INDEX p_failed; ALTER TABLE idempotency_keys_processed ADD PRIMARY KEY (message_id, consumer)"},
		{sql: "DROP INDEX idempotency_keys_outbox_id", refused: outbox},
		{sql: "CREATE UNIQUE INDEX idempotency_keys_outbox_id ON idempotency_keys_outbox (event_id)"},
		{sql: "DROP TABLE idempotency_keys_outbox", refused: "the table idempotency_keys_outbox does not exist"},
	} {
		if _, err := pool.Exec(ctx, step.sql); (err != nil) != step.sqlFails {
			t.Fatalf("%s: %v", step.sql, err)
		}
		_, err := NewStore(ctx, pool)
		switch {
		case step.refused == "" && err != nil:
			t.Errorf("after %s: NewStore: %v, want a store", step.sql, err)
		case step.refused != "" && (err == nil || !strings.Contains(err.Error(), step.refused)):
			t.Errorf("after %s: NewStore: %v, want a refusal with %q", step.sql, err, step.refused)
		}
	}
}
