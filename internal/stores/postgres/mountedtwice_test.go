package postgres

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestMountedTwiceOverTwoStores: two NewStore values over one schema (each
// with its own pool, one of them through a proxy: another address) are one
// store to the runtime; a wrapper mounted twice over them answers 500
// mounted-twice, not 409 in-progress for ever. A store of another schema
// of the same database is another (nested transactionally over two schemas,
// the inner claim waits on the key's advisory lock, which the schemas
// share: the harness leaves that case out).
func TestMountedTwiceOverTwoStores(t *testing.T) {
	db := newTestDB(t)
	_, viaProxy := db.proxy(t)
	b, err := NewStore(context.Background(), db.pool(t, viaProxy))
	if err != nil {
		t.Fatal(err)
	}
	harness.MountedTwice(t, db.store(t), b, newTestDB(t).store(t), false)
}
