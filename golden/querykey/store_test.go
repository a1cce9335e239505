package querykey

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/idemgen/idemgen/golden/internal/behave"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestWithGeneratedSQLiteStore runs the generated middleware over the
// generated SQLite store (table order_keys, from -table).
func TestWithGeneratedSQLiteStore(t *testing.T) {
	ctx := context.Background()
	dsn := "file:" + filepath.Join(t.TempDir(), "keys.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := ApplySchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := &behave.Counter{Status: http.StatusCreated}
	mw, err := Middleware(idemrt.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(c)
	behave.Want(t, "first", behave.Do(t, h, "POST", "/api/orders?request_id=s1", nil, `{"item":"tea"}`), http.StatusCreated, false)
	behave.Want(t, "replay", behave.Do(t, h, "POST", "/api/orders?request_id=s1", nil, `{"item":"tea"}`), http.StatusCreated, true)
	behave.WantProblem(t, "mismatch", behave.Do(t, h, "POST", "/api/orders?request_id=s1", nil, `{"item":"milk"}`), http.StatusUnprocessableEntity)
	r := behave.InProgress(t, h, c, "POST", "/orders?request_id=s2", nil, `{"item":"tea"}`, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, h, "POST", "/orders?request_id=s2", nil, `{"item":"tea"}`), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM order_keys").Scan(&n); err != nil || n != 2 {
		t.Errorf("order_keys holds %d records (%v), want 2", n, err)
	}
}
