package harness

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// SQLBackend is the Backend of a database/sql store (SQLite, MySQL; both
// take ? placeholders) over conn. txFrom and markProcessed are the store
// package's generated TxFromContext and MarkProcessed, so that the handler's
// writes and the consumer's deliveries go through the generated code.
func SQLBackend(st idemrt.TxStore, conn *sql.DB,
	txFrom func(context.Context) (*sql.Tx, bool),
	markProcessed func(ctx context.Context, tx *sql.Tx, consumer, messageID string) (bool, error),
) *Backend {
	const insert = "INSERT INTO effects (id, worker) VALUES (?, ?)"
	return &Backend{
		Store: st,
		Effect: func(ctx context.Context, id, worker string) error {
			if tx, ok := txFrom(ctx); ok {
				_, err := tx.ExecContext(ctx, insert, id, worker)
				return err
			}
			_, err := conn.ExecContext(ctx, insert, id, worker)
			return err
		},
		Effects: func(ctx context.Context, id string) (n int, err error) {
			err = conn.QueryRowContext(ctx, "SELECT count(*) FROM effects WHERE id = ?", id).Scan(&n)
			return n, err
		},
		Deliver: func(ctx context.Context, consumer, id string, hold time.Duration, rollback bool) (bool, error) {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return false, err
			}
			defer tx.Rollback()
			first, err := markProcessed(ctx, tx, consumer, id)
			if err != nil {
				return false, err
			}
			if first {
				if _, err := tx.ExecContext(ctx, insert, id, "consumer"); err != nil {
					return false, err
				}
			}
			time.Sleep(hold)
			if rollback {
				return first, tx.Rollback()
			}
			return first, tx.Commit()
		},
		Records: func(ctx context.Context) (n int, err error) {
			err = conn.QueryRowContext(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&n)
			return n, err
		},
	}
}

// SQLHTTPBackend creates the table "plain (id idType PRIMARY KEY, body
// bodyType)" on conn and returns the HTTPBackend of a database/sql store
// over it (see NewSQLHTTPBackend); its statements are closed when b ends.
func SQLHTTPBackend(b testing.TB, st idemrt.TxStore, conn *sql.DB, txFrom func(context.Context) (*sql.Tx, bool), idType, bodyType string) HTTPBackend {
	b.Helper()
	hb, closeStmts, err := NewSQLHTTPBackend(context.Background(), st, conn, txFrom, idType, bodyType)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeStmts)
	return hb
}

// NewSQLHTTPBackend creates the table "plain (id idType PRIMARY KEY, body
// bodyType)" on conn and returns the HTTPBackend of a database/sql store
// over it, and the function that closes its statements; txFrom is the
// store package's generated TxFromContext. Its statements are prepared
// once, as the stores' are (without that, go-sql-driver/mysql makes each
// query with arguments three round trips: prepare, execute, close).
func NewSQLHTTPBackend(ctx context.Context, st idemrt.TxStore, conn *sql.DB, txFrom func(context.Context) (*sql.Tx, bool), idType, bodyType string) (HTTPBackend, func(), error) {
	if _, err := conn.ExecContext(ctx, "CREATE TABLE plain (id "+idType+" PRIMARY KEY, body "+bodyType+" NOT NULL)"); err != nil {
		return HTTPBackend{}, nil, err
	}
	insert, err := conn.PrepareContext(ctx, "INSERT INTO plain (id, body) VALUES (?, ?)")
	if err != nil {
		return HTTPBackend{}, nil, err
	}
	get, err := conn.PrepareContext(ctx, "SELECT body FROM plain WHERE id = ?")
	if err != nil {
		insert.Close()
		return HTTPBackend{}, nil, err
	}
	save, getSaved, err := prepareSaved(ctx, conn, idType, bodyType)
	if err != nil {
		insert.Close()
		get.Close()
		return HTTPBackend{}, nil, err
	}
	insertIn := func(ctx context.Context, tx *sql.Tx, id string, body []byte) error {
		_, err := tx.StmtContext(ctx, insert).ExecContext(ctx, id, body)
		return err
	}
	return HTTPBackend{
		Store: st,
		Insert: func(ctx context.Context, id string, body []byte) error {
			if tx, ok := txFrom(ctx); ok {
				return insertIn(ctx, tx, id, body)
			}
			_, err := insert.ExecContext(ctx, id, body)
			return err
		},
		InsertIn: func(ctx context.Context, tx idemrt.Tx, id string, body []byte) error {
			sqlTx, ok := tx.Handle().(*sql.Tx)
			if !ok {
				return fmt.Errorf("harness: the store's transaction is a %T, not a *sql.Tx", tx.Handle())
			}
			return insertIn(ctx, sqlTx, id, body)
		},
		Get: func(ctx context.Context, id string) (body []byte, err error) {
			err = get.QueryRowContext(ctx, id).Scan(&body)
			return body, err
		},
		Save: func(ctx context.Context, id string, v []byte, expires time.Time) error {
			_, err := save.ExecContext(ctx, id, v, expires.UnixMilli())
			return err
		},
		GetSaved: func(ctx context.Context, id string, now time.Time) (v []byte, err error) {
			err = getSaved.QueryRowContext(ctx, id, now.UnixMilli()).Scan(&v)
			return v, err
		},
	}, func() { insert.Close(); get.Close(); save.Close(); getSaved.Close() }, nil
}

// prepareSaved creates the replay floor's table "saved" on conn (see
// HTTPBackend.Save) and prepares its INSERT and its read.
func prepareSaved(ctx context.Context, conn *sql.DB, idType, bodyType string) (save, get *sql.Stmt, err error) {
	if _, err := conn.ExecContext(ctx, "CREATE TABLE saved (id "+idType+" PRIMARY KEY, v "+bodyType+" NOT NULL, expires_at BIGINT NOT NULL)"); err != nil {
		return nil, nil, err
	}
	if save, err = conn.PrepareContext(ctx, "INSERT INTO saved (id, v, expires_at) VALUES (?, ?, ?)"); err != nil {
		return nil, nil, err
	}
	if get, err = conn.PrepareContext(ctx, "SELECT v FROM saved WHERE id = ? AND expires_at > ?"); err != nil {
		save.Close()
		return nil, nil, err
	}
	return save, get, nil
}
