package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestNewStoreRefusesSchemaWithoutClaimFunctions: on a schema applied by
// an earlier version (no idempotency_keys_acquire, or no
// idempotency_keys_claim_tx), claims would fail, so NewStore refuses it at
// start-up, naming the function; once the schema is applied again, it
// starts.
func TestNewStoreRefusesSchemaWithoutClaimFunctions(t *testing.T) {
	for _, fn := range []string{"idempotency_keys_acquire", "idempotency_keys_claim_tx"} {
		t.Run(fn, func(t *testing.T) {
			ctx := context.Background()
			pool := newTestDB(t).pool(t, nil)
			if _, err := pool.Exec(ctx, "DROP FUNCTION "+fn); err != nil {
				t.Fatal(err)
			}
			if _, err := NewStore(ctx, pool); err == nil || !strings.Contains(err.Error(), fn) {
				t.Fatalf("NewStore on a schema without %s: %v; want a refusal naming it", fn, err)
			}
			if err := ApplySchema(ctx, pool); err != nil {
				t.Fatal(err)
			}
			if _, err := NewStore(ctx, pool); err != nil {
				t.Fatalf("NewStore after ApplySchema: %v", err)
			}
		})
	}
}

// TestClaimTxFreshRowIsAcquires: the transactional claim inserts a new
// key's row itself (INSERT ... ON CONFLICT DO NOTHING, so that it needs no
// read first); that row must be the one idempotency_keys_acquire inserts
// (the same columns, epoch, lease, expiry and sweep time), or the two
// modes would fence and expire records differently.
func TestClaimTxFreshRowIsAcquires(t *testing.T) {
	fresh := func(fn string) string {
		start := strings.Index(Schema, "CREATE OR REPLACE FUNCTION "+fn+"(")
		if start < 0 {
			t.Fatalf("the schema has no function %s", fn)
		}
		body := Schema[start:]
		from, to := strings.Index(body, "INSERT INTO"), strings.Index(body, "ON CONFLICT")
		if from < 0 || to < from {
			t.Fatalf("%s has no INSERT ... ON CONFLICT", fn)
		}
		return strings.Join(strings.Fields(body[from:to]), " ")
	}
	acquire, claimTx := fresh("idempotency_keys_acquire"), fresh("idempotency_keys_claim_tx")
	if acquire != claimTx {
		t.Errorf("the fresh rows differ:\nacquire:  %s\nclaim_tx: %s", acquire, claimTx)
	}
}
