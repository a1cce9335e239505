package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestNewStoreRefusesSchemaWithoutAcquire: on a schema applied by an
// earlier version (no idempotency_keys_acquire), every claim would fail,
// so NewStore refuses it at start-up, naming the function; once the
// schema is applied again, it starts.
func TestNewStoreRefusesSchemaWithoutAcquire(t *testing.T) {
	ctx := context.Background()
	pool := newTestDB(t).pool(t, nil)
	if _, err := pool.Exec(ctx, "DROP FUNCTION idempotency_keys_acquire"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(ctx, pool); err == nil || !strings.Contains(err.Error(), "idempotency_keys_acquire") {
		t.Fatalf("NewStore on a schema without the claim's function: %v; want a refusal naming it", err)
	}
	if err := ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(ctx, pool); err != nil {
		t.Fatalf("NewStore after ApplySchema: %v", err)
	}
}
