package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
)

// useRedis keeps be's idempotency records in the Redis (redis://host:port)
// or Redis Cluster (redis-cluster://host:port,host:port) at dsn, for
// -idem-dsn; the business data stays in be's SQL database.
//
// A Redis write cannot commit in the SQL transaction, and the runtime
// refuses transactional operations over a store that is not a TxStore. So
// useRedis refuses to start while the spec has transactional operations,
// naming them, unless withoutTx (-idem-redis-without-transactions) says the
// operator accepts weaker protection than the spec asks for. Then it runs
// them without the shared transaction, and says so in the log: each
// request's writes go through one SQL transaction (begun when the handler
// first writes), committed when the handler answers 2xx and before the
// wrapper saves the response in Redis. If the process dies between the two,
// the key stays in progress until its lease ends and the retry runs the
// handler again: a second charge (CONTRACT §4). Webhook deliveries stay
// exactly-once: their dedupe (MarkProcessed) is in the SQL transaction.
func useRedis(ctx context.Context, be *backend, dsn string, withoutTx bool, log *slog.Logger) error {
	var names []string
	var policies []*idemrt.Policy
	for _, p := range idemsqlite.Policies() { // the same spec in every dialect
		cp := *p
		if cp.Transactional {
			cp.Transactional = false
			names = append(names, cp.OperationID)
		}
		policies = append(policies, &cp)
	}
	if len(names) > 0 && !withoutTx {
		return fmt.Errorf("-idem-dsn: the spec's operations %s are transactional (x-idempotent transactional: true), "+
			"and a Redis record cannot commit in their SQL transaction: a crash between a handler's commit and its saved "+
			"response would run the handler again after the lease; keep the records in SQL (no -idem-dsn), or pass "+
			"-idem-redis-without-transactions to accept that", strings.Join(names, ", "))
	}
	client, err := redisstore.NewClient(dsn)
	if err != nil {
		return err
	}
	// New refuses a Redis that evicts keys (maxmemory-policy other than
	// noeviction), and warns in log when the server has no append-only file.
	store, err := redisstore.New(ctx, client, redisstore.Options{Logger: log})
	if err != nil {
		client.Close()
		return fmt.Errorf("-idem-dsn %s: %w", redact(dsn), err)
	}
	sqlStore, ok := be.store.(idemrt.TxStore)
	if !ok {
		client.Close()
		return fmt.Errorf("-idem-dsn: the %s store is not a TxStore", be.dialect)
	}
	log.Warn("-idem-redis-without-transactions: transactional operations run without one shared transaction; "+
		"a crash between a handler's commit and its saved response runs the handler again after the lease",
		"operations", strings.Join(names, ","))
	switch d := be.data.(type) {
	case *sqlData:
		d.txFrom = func(ctx context.Context) (*sql.Tx, bool) { tx, ok := requestTx(ctx).(*sql.Tx); return tx, ok }
	case *pgData:
		d.txFrom = func(ctx context.Context) (pgx.Tx, bool) { tx, ok := requestTx(ctx).(pgx.Tx); return tx, ok }
	}
	closeSQL := be.close
	be.close = func() { client.Close(); closeSQL() }
	be.store = store
	be.where += ", idempotency records in " + redact(dsn)
	be.middleware = func(opts idemrt.Options) (func(http.Handler) http.Handler, error) {
		mw, err := idemrt.NewMiddleware(opts, policies...)
		if err != nil {
			return nil, err
		}
		return func(h http.Handler) http.Handler { return mw(commitEach(sqlStore, h)) }, nil
	}
	return nil
}

type lazyTxKey struct{}

// lazyTx is the SQL transaction of one request, begun on first use.
type lazyTx struct {
	ctx   context.Context
	store idemrt.TxStore
	tx    idemrt.Tx
	err   error
}

// requestTx returns the request's transaction handle (*sql.Tx or pgx.Tx),
// beginning it; nil outside commitEach or if BEGIN failed.
func requestTx(ctx context.Context) any {
	l, _ := ctx.Value(lazyTxKey{}).(*lazyTx)
	if l == nil || l.err != nil {
		return nil
	}
	if l.tx == nil {
		if l.tx, l.err = l.store.BeginTx(l.ctx); l.err != nil {
			return nil
		}
	}
	return l.tx.Handle()
}

// commitEach runs h with a request transaction and holds its response: a
// 2xx is sent after the transaction commits (500 if the commit fails),
// anything else after it rolls back.
func commitEach(store idemrt.TxStore, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := &lazyTx{ctx: r.Context(), store: store}
		held := &heldResponse{header: http.Header{}}
		panicked := true
		func() {
			defer func() {
				if panicked && l.tx != nil {
					l.tx.Rollback(context.WithoutCancel(r.Context()))
				}
			}()
			h.ServeHTTP(held, r.WithContext(context.WithValue(r.Context(), lazyTxKey{}, l)))
			panicked = false
		}()
		if held.status == 0 {
			held.status = http.StatusOK
		}
		if l.tx != nil && held.status/100 != 2 {
			l.tx.Rollback(r.Context())
		} else if l.tx != nil {
			if err := l.tx.Commit(r.Context()); err != nil {
				http.Error(w, "commit failed", http.StatusInternalServerError)
				return
			}
		}
		for k, v := range held.header {
			w.Header()[k] = v
		}
		w.WriteHeader(held.status)
		w.Write(held.body.Bytes())
	})
}

// heldResponse keeps a handler's response until its transaction ends.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *heldResponse) Header() http.Header { return w.header }

func (w *heldResponse) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *heldResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
