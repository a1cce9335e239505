package headerkey

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestWithGeneratedPostgresStore runs the generated middleware over the
// generated PostgreSQL store, in a fresh schema.
func TestWithGeneratedPostgresStore(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "golden_headerkey_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	c := &behave.Counter{Status: http.StatusCreated}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", c)
	mw, err := Middleware(idemrt.Options{Store: store, Principal: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(mux)
	hdr := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "pg-1"}
	behave.Want(t, "first", behave.Do(t, h, "POST", "/v1/charges", hdr, `{"amount":1}`), http.StatusCreated, false)
	behave.Want(t, "replay", behave.Do(t, h, "POST", "/v1/charges", hdr, `{"amount":1}`), http.StatusCreated, true)
	behave.WantProblem(t, "mismatch", behave.Do(t, h, "POST", "/v1/charges", hdr, `{"amount":2}`), http.StatusUnprocessableEntity)
	hdr2 := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "pg-2"}
	r := behave.InProgress(t, h, c, "POST", "/v1/charges", hdr2, `{"amount":1}`, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, h, "POST", "/v1/charges", hdr2, `{"amount":1}`), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
	if n := c.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}
