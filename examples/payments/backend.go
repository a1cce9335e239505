package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/idemgen/idemgen/examples/payments/internal/idemmysql"
	"github.com/idemgen/idemgen/examples/payments/internal/idempg"
	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
	"github.com/idemgen/idemgen/internal/crashpoint"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// backend is one database with both the idempotency key store (from the
// generated package of its dialect) and the service's own tables.
//
// idemgen generates one store per dialect, so the example generates the same
// spec three times (internal/idemsqlite, idempg, idemmysql) and picks one
// here by the DSN. An application on one database needs one.
type backend struct {
	dialect    string
	where      string // for the start-up log, without credentials
	store      idemrt.Store
	middleware func(idemrt.Options) (func(http.Handler) http.Handler, error)
	data       dataStore
	close      func()
}

// openBackend opens the database cfg names (SQLite by default) and creates
// the tables if they do not exist.
func openBackend(ctx context.Context, cfg config, log *slog.Logger) (*backend, error) {
	switch dsn := cfg.dsn; {
	case dsn == "":
		return openSQLite(ctx, cfg.dbPath, cfg)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn, cfg)
	case strings.HasPrefix(dsn, "mysql://"):
		return openMySQL(ctx, strings.TrimPrefix(dsn, "mysql://"), cfg)
	case strings.HasPrefix(dsn, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"), cfg)
	default:
		return nil, fmt.Errorf("-dsn %q: want postgres://..., mysql://user@tcp(host:port)/db or sqlite:FILE", redact(dsn))
	}
}

// redact hides a password in a URL-shaped DSN.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(dsn, "@"); i >= 0 && strings.Contains(dsn[:i], ":") {
		return "***" + dsn[i:]
	}
	return dsn
}

// sweep deletes expired idempotency records until ctx is done.
func (b *backend) sweep(ctx context.Context, every time.Duration, log *slog.Logger) {
	if err := idemrt.RunSweeper(ctx, b.store, every, 1000, idemrt.SweepLogger(log)); err != nil {
		log.Error("sweeper", "err", err)
	}
}

// bound caps a database/sql pool as cfg says. Without it a burst of
// requests opens a connection each, past the server's max_connections.
func bound(db *sql.DB, cfg config) {
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxIdleConns)
	db.SetConnMaxLifetime(cfg.connMaxLifetime)
}

func openSQLite(ctx context.Context, path string, cfg config) (*backend, error) {
	// WAL, a busy timeout, and write transactions that take the lock at
	// BEGIN: what the generated SQLite store asks for.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	bound(db, cfg)
	be, err := func() (*backend, error) {
		if err := idemsqlite.ApplySchema(ctx, db); err != nil {
			return nil, err
		}
		if err := applyAppSchema(ctx, execSQL(db), "sqlite"); err != nil {
			return nil, err
		}
		store, err := idemsqlite.NewStore(ctx, db)
		if err != nil {
			return nil, err
		}
		return &backend{
			dialect: "sqlite", where: path, store: store, middleware: idemsqlite.Middleware,
			data: &sqlData{db: db, txFrom: idemsqlite.TxFromContext, markProcessed: idemsqlite.MarkProcessed,
				addEvents: idemsqlite.AddEvents},
			close: func() { db.Close() },
		}, nil
	}()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	return be, nil
}

func openPostgres(ctx context.Context, dsn string, cfg config) (*backend, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", redact(dsn), err)
	}
	pc.MaxConns, pc.MaxConnLifetime = int32(min(cfg.maxConns, math.MaxInt32)), cfg.connMaxLifetime
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", redact(dsn), err)
	}
	be, err := func() (*backend, error) {
		if err := idempg.ApplySchema(ctx, pool); err != nil {
			return nil, err
		}
		exec := func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err }
		if err := applyAppSchema(ctx, exec, "postgres"); err != nil {
			return nil, err
		}
		store, err := idempg.NewStore(ctx, pool)
		if err != nil {
			return nil, err
		}
		return &backend{
			dialect: "postgres", where: redact(dsn), store: store, middleware: idempg.Middleware,
			data: &pgData{pool: pool, txFrom: idempg.TxFromContext,
				markProcessed: func(ctx context.Context, tx pgx.Tx, consumer, id string) (bool, error) {
					return idempg.MarkProcessed(ctx, tx, consumer, id)
				},
				addEvents: idempg.AddEvents},
			close: pool.Close,
		}, nil
	}()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", redact(dsn), err)
	}
	return be, nil
}

func openMySQL(ctx context.Context, dsn string, cfg config) (*backend, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	where := mc.User + "@" + mc.Net + "(" + mc.Addr + ")/" + mc.DBName
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	bound(db, cfg)
	be, err := func() (*backend, error) {
		if err := idemmysql.ApplySchema(ctx, db); err != nil {
			return nil, err
		}
		if err := applyAppSchema(ctx, execSQL(db), "mysql"); err != nil {
			return nil, err
		}
		store, err := idemmysql.NewStore(ctx, db)
		if err != nil {
			return nil, err
		}
		return &backend{
			dialect: "mysql", where: where, store: store, middleware: idemmysql.Middleware,
			data: &sqlData{db: db, mysql: true, txFrom: idemmysql.TxFromContext, markProcessed: idemmysql.MarkProcessed,
				addEvents: idemmysql.AddEvents},
			close: func() { db.Close() },
		}, nil
	}()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql %s: %w", where, err)
	}
	return be, nil
}

func execSQL(db *sql.DB) func(context.Context, string) error {
	return func(ctx context.Context, q string) error { _, err := db.ExecContext(ctx, q); return err }
}

// newServer puts the handlers behind the generated idempotency middleware,
// and that behind the checks of who is calling. The principal of the /v1
// operations is the bearer token (the merchant); the webhook is anonymous
// (its keys are the provider's event ids), and only deliveries the provider
// signed reach the idempotency middleware.
func newServer(be *backend, cfg config, log *slog.Logger) (http.Handler, error) {
	s := &server{data: be.data, chargeDelay: cfg.chargeDelay, log: log}
	opts := idemrt.Options{
		Store:     be.store,
		Principal: bearer,
		Logger:    log,
		Hooks:     logHooks(log, cfg.crashAt),
		// Saved responses hold card fingerprints and customer ids: sealed
		// at rest when -idem-encryption-keys gives a key ring.
		Encryption: cfg.idemKeys,
	}
	if cfg.otel {
		var err error
		if opts, err = withOTel(opts); err != nil {
			return nil, err
		}
	}
	idem, err := be.middleware(opts)
	if err != nil {
		return nil, err
	}
	if cfg.webhookSecret == demoWebhookSecret {
		log.Warn("the webhook secret is the demo default: set PAYMENTS_WEBHOOK_SECRET to the provider's")
	}
	secured := requireSignature([]byte(cfg.webhookSecret), cfg.webhookTolerance, idem(s.routes()))
	return logRequests(log, requireBearer(secured)), nil
}

// crashAfterCommit is the -crash-at point of a test: a charge or refund
// (and its outbox event) committed, its response not yet written. A
// transactional operation's Completed hook runs exactly there.
const crashAfterCommit = "after-commit"

// logHooks logs, at info and warn, the idempotency events that the runtime's
// own logger reports only at debug: replays, conflicts and mismatches. (It
// logs takeovers, fenced completions and store errors itself, at info/warn.)
// With crash armed (-crash-at), it also kills the process after a charge's
// or refund's commit.
func logHooks(log *slog.Logger, crash *crashpoint.Point) idemrt.Hooks {
	ev := func(msg string, level slog.Level) func(context.Context, idemrt.Event) {
		return func(ctx context.Context, e idemrt.Event) {
			// The key's digest, not the key: a refund's key is derived
			// from its fields (the charge and the amount).
			attrs := []any{"op", e.OperationID, "key_hash", idemrt.KeyDigest(e.Key)}
			if e.Epoch != 0 {
				attrs = append(attrs, "epoch", e.Epoch)
			}
			if e.Status != 0 {
				attrs = append(attrs, "status", e.Status)
			}
			if e.Err != nil {
				attrs = append(attrs, "err", e.Err)
			}
			log.Log(ctx, level, msg, attrs...)
		}
	}
	return idemrt.Hooks{
		Replayed:    ev("idempotent replay", slog.LevelInfo),
		Conflict:    ev("idempotency conflict: key in progress", slog.LevelWarn),
		Mismatch:    ev("idempotency mismatch: key reused with another request", slog.LevelWarn),
		Unavailable: ev("idempotency: result unavailable", slog.LevelWarn),
		Completed: func(ctx context.Context, e idemrt.Event) {
			if e.OperationID == "createCharge" || e.OperationID == "createRefund" {
				crash.Reached(crashAfterCommit)
			}
		},
	}
}
