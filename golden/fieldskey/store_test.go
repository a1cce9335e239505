package fieldskey

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestWithGeneratedMySQLStore runs the generated middleware over the
// generated MySQL store, in a fresh database.
func TestWithGeneratedMySQLStore(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	ctx := context.Background()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 6)
	rand.Read(b)
	name := "golden_fieldskey_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE " + name) })
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	cfg.ParseTime = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
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
	body := `{"order":{"id":"m-1"},"carrier":"ups"}`
	behave.Want(t, "first", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusCreated, false)
	behave.Want(t, "replay", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusCreated, true)
	behave.WantProblem(t, "mismatch", behave.Do(t, h, "POST", "/shipments", nil, `{"order":{"id":"m-1","x":1},"carrier":"ups"}`), http.StatusUnprocessableEntity)
	body2 := `{"order":{"id":"m-2"},"carrier":"ups"}`
	r := behave.InProgress(t, h, c, "POST", "/shipments", nil, body2, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, h, "POST", "/shipments", nil, body2), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
}
