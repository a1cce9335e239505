package postgres

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestSealed: with encryption on, the rows hold neither the response nor
// its hex, and a ciphertext moved onto another row does not open.
func TestSealed(t *testing.T) {
	db := newTestDB(t)
	pool := db.pool(t, nil)
	harness.Sealed(t, db.backend(t, nil), harness.SealedStore{
		Raw: func(ctx context.Context) ([]byte, error) {
			rows, err := pool.Query(ctx, "SELECT scope, idem_key, status::text, headers, body FROM idempotency_keys")
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []byte
			for rows.Next() {
				var scope, key, status string
				var headers, body []byte
				if err := rows.Scan(&scope, &key, &status, &headers, &body); err != nil {
					return nil, err
				}
				out = append(out, scope+"\x00"+key+"\x00"+status+"\x00"...)
				out = append(append(append(out, headers...), 0), body...)
			}
			return out, rows.Err()
		},
		Move: func(ctx context.Context, from, to string) error {
			_, err := pool.Exec(ctx, `UPDATE idempotency_keys t SET status = s.status, headers = s.headers, body = s.body
				FROM idempotency_keys s WHERE s.idem_key = $1 AND t.idem_key = $2`, from, to)
			return err
		},
	})
}
