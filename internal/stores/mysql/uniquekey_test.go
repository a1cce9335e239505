package mysql

import (
	"context"
	"strings"
	"testing"
)

// TestNewStoreRefusesTableWithoutUniqueKey: NewStore refuses a key table
// (or consumer table, or outbox) without a unique index on exactly its key
// columns, whole. Without one the claim's ON DUPLICATE KEY UPDATE inserts a second
// row for the key: measured with the primary key dropped, 16 concurrent
// claims of one key acquired it 7 to 12 times (20 keys), where it must be
// once; without the outbox's index on event_id, AddEvents accepts an id
// twice. A unique index in another column order is as good as the primary
// key. A key column of a character type (a table made by hand) is refused
// too: under its collation 'K' and 'k', or 'k' and 'k ', are one key, so
// two requests with different keys would share a record.
func TestNewStoreRefusesTableWithoutUniqueKey(t *testing.T) {
	db := newTestDB(t)
	conn := db.open(t, nil)
	ctx := context.Background()
	for _, step := range []struct {
		alter, refused string // refused: the table named, "" if accepted
	}{
		{"ALTER TABLE idempotency_keys DROP PRIMARY KEY", "idempotency_keys"},
		{"ALTER TABLE idempotency_keys ADD UNIQUE KEY by_prefix (scope, principal, idem_key(10))", "idempotency_keys"},
		{"ALTER TABLE idempotency_keys ADD UNIQUE KEY by_key (idem_key, scope, principal)", ""},
		{"ALTER TABLE idempotency_keys MODIFY idem_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL", "idempotency_keys"},
		{"ALTER TABLE idempotency_keys MODIFY idem_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL", "idempotency_keys"},
		{"ALTER TABLE idempotency_keys MODIFY idem_key VARBINARY(255) NOT NULL", ""},
		{"ALTER TABLE idempotency_keys_processed DROP PRIMARY KEY", "idempotency_keys_processed"},
		{"ALTER TABLE idempotency_keys_processed ADD PRIMARY KEY (consumer, message_id)", ""},
		// Without any index of that name, preparing MarkSent (FORCE INDEX)
		// fails; a non-unique one passed.
		{"ALTER TABLE idempotency_keys_outbox DROP INDEX idempotency_keys_outbox_id, ADD KEY idempotency_keys_outbox_id (event_id)", "idempotency_keys_outbox"},
		{"ALTER TABLE idempotency_keys_outbox DROP INDEX idempotency_keys_outbox_id, ADD UNIQUE KEY idempotency_keys_outbox_id (event_id)", ""},
	} {
		if _, err := conn.ExecContext(ctx, step.alter); err != nil {
			t.Fatalf("%s: %v", step.alter, err)
		}
		st, err := NewStore(ctx, conn)
		switch {
		case step.refused == "" && err != nil:
			t.Errorf("after %s: NewStore: %v, want a store", step.alter, err)
		case step.refused != "" && (err == nil || !strings.Contains(err.Error(), "the table "+step.refused+" has no PRIMARY KEY or UNIQUE index")):
			t.Errorf("after %s: NewStore: %v, want a refusal naming %s", step.alter, err, step.refused)
		}
		if st != nil {
			st.Close()
		}
	}
}
