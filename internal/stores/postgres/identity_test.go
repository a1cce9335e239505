package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestNewStoreIdentityReadFails: when the read of the store's identity
// fails for another reason than a role that may not call
// pg_control_system (here its statement's context is cancelled as it
// starts), NewStore returns the error: a store without its identity would
// let a wrapper mounted inside another one over the same table answer 409
// in-progress for ever instead of 500 mounted-twice.
func TestNewStoreIdentityReadFails(t *testing.T) {
	db := newTestDB(t)
	pool := db.pool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = cancelOn("pg_control_system") })
	st, err := NewStore(context.Background(), pool)
	if err == nil {
		t.Fatalf("NewStore succeeded with identity %q; want the identity read's error", st.StoreIdentity())
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("NewStore: %v; want the identity read's context.Canceled", err)
	}
	st, err = NewStore(context.Background(), db.pool(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if id := st.StoreIdentity(); !strings.HasPrefix(id, "postgres:") {
		t.Fatalf("NewStore without the fault: identity %q", id)
	}
}

// cancelOn is a pgx tracer that cancels the context of each statement
// whose text contains it, as the statement starts.
type cancelOn string

func (c cancelOn) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, string(c)) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	return ctx
}

func (cancelOn) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
