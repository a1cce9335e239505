package sqlite

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestSealed: with encryption on, the rows hold neither the response nor
// its hex, and a ciphertext moved onto another row does not open.
func TestSealed(t *testing.T) {
	db := newTestDB(t)
	conn := db.open(t)
	harness.Sealed(t, db.backend(t), harness.SealedStore{
		Raw: harness.SQLRaw(conn, "idempotency_keys"),
		Move: func(ctx context.Context, from, to string) error {
			_, err := conn.ExecContext(ctx, `UPDATE idempotency_keys SET (status, headers, body) =
				(SELECT status, headers, body FROM idempotency_keys WHERE idem_key = ?) WHERE idem_key = ?`, from, to)
			return err
		},
	})
}
