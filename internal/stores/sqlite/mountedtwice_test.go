package sqlite

import (
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestMountedTwiceOverTwoStores: two NewStore values over one database
// file (each with its own *sql.DB) are one store to the runtime; a wrapper
// mounted twice over them answers 500 mounted-twice, not 409 in-progress
// for ever. A store of another file is another.
func TestMountedTwiceOverTwoStores(t *testing.T) {
	db := newTestDB(t)
	harness.MountedTwice(t, db.store(t), db.store(t), newTestDB(t).store(t), true)
}
