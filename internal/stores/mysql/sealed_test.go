package mysql

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestSealed: with encryption on, the rows hold neither the response nor
// its hex, and a ciphertext moved onto another row does not open.
func TestSealed(t *testing.T) {
	db := newTestDB(t)
	conn := db.open(t, nil)
	harness.Sealed(t, db.backend(t, nil), harness.SealedStore{
		Raw: harness.SQLRaw(conn, "idempotency_keys"),
		Move: func(ctx context.Context, from, to string) error {
			_, err := conn.ExecContext(ctx, `UPDATE idempotency_keys t JOIN idempotency_keys s ON s.idem_key = ?
				SET t.status = s.status, t.headers = s.headers, t.body = s.body WHERE t.idem_key = ?`, from, to)
			return err
		},
	})
}
