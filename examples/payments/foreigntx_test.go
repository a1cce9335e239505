package main

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/internal/idempg"
	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// A transactional handler written for the PostgreSQL output, served in a
// test by the SQLite output (the README's "SQLite in tests"), used to get
// (nil, false) from idempg.TxFromContext and run outside the transaction
// without a word. It must be loud: the call panics with an
// *idemrt.ForeignTxError, the transaction rolls back and the key is
// released. The SQLite output's own TxFromContext, and idempg's outside
// any transaction, keep working.
func TestForeignTransactionIsLoud(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "k.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := idemsqlite.ApplySchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	store, err := idemsqlite.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []idemrt.Store{store, idemrt.NewMemoryStore()} {
		var released int
		mw, err := idemsqlite.Middleware(idemrt.Options{
			Store: st, Principal: func(*http.Request) (string, error) { return "acct", nil },
			Hooks: idemrt.Hooks{Released: func(context.Context, idemrt.Event) { released++ }},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, isMem := st.(*idemrt.MemoryStore)
		var sqliteOK, silent bool
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isMem {
				_, sqliteOK = idemsqlite.TxFromContext(r.Context())
			}
			_, ok := idempg.TxFromContext(r.Context())
			silent = !ok
			w.WriteHeader(http.StatusCreated)
		}))
		r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":1,"currency":"usd","customer":"c"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		var foreign *idemrt.ForeignTxError
		func() {
			defer func() {
				if err, ok := recover().(error); ok {
					errors.As(err, &foreign)
				}
			}()
			h.ServeHTTP(w, r)
		}()
		if silent {
			t.Errorf("%T: idempg.TxFromContext reported no transaction and the handler went on (the silent path)", st)
		}
		if !isMem && !sqliteOK {
			t.Errorf("%T: idemsqlite.TxFromContext found no transaction", st)
		}
		if foreign == nil || released != 1 {
			t.Fatalf("%T: released %d, panic %v; want a ForeignTxError panic and the key released", st, released, foreign)
		}
		want := "a *sql.Tx, not a pgx.Tx"
		if isMem {
			want = "no driver handle"
		}
		if msg := foreign.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, "PostgreSQL") {
			t.Errorf("%T: message %q", st, msg)
		}
	}
	// Outside a transaction, ok is false and nothing panics.
	if tx, ok := idempg.TxFromContext(ctx); ok || tx != nil {
		t.Errorf("no transaction: got %v %v", tx, ok)
	}
}
