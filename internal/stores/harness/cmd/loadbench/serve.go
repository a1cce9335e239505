package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/internal/stores/mysql"
	"github.com/idemgen/idemgen/internal/stores/postgres"
	"github.com/idemgen/idemgen/internal/stores/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"
)

// Info is what the server answers at infoPath: what the driver needs to
// build its requests and check its runs.
type Info struct {
	Dialect string             `json:"dialect"`
	Prefix  string             `json:"prefix"`
	Rows    int                `json:"rows"`
	Body    string             `json:"body"`
	Cases   []harness.HTTPCase `json:"cases"`
	Ratios  [][2]string        `json:"ratios"`
}

const infoPath = "/_load/info"

// profilePath serves net/http/pprof's CPU profile (?seconds=N).
const profilePath = "/debug/pprof/profile"

// readyLine starts the line the server prints on stdout once it serves:
// readyLine URL.
const readyLine = "loadbench serving "

// backend is one dialect's service on a fresh database, and what drops it.
type backend struct {
	hb     harness.HTTPBackend
	floors []harness.HTTPFloor
	close  func() error
}

// openers open a fresh database (schema) of each dialect, from the
// variables the tests read.
var openers = map[string]func(ctx context.Context) (*backend, error){
	"postgres": openPostgres,
	"sqlite":   openSQLite,
	"mysql":    openMySQL,
}

// serve runs the server of one dialect: a fresh database, the seeded
// service on 127.0.0.1 (a free port unless addr says), until stdin ends
// or a SIGINT/SIGTERM; then it drops the database.
func serve(dialect, addr string, stdout io.Writer) error {
	open, ok := openers[dialect]
	if !ok {
		return fmt.Errorf("unknown dialect %q (postgres, sqlite, mysql)", dialect)
	}
	ctx := context.Background()
	be, err := open(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", dialect, err)
	}
	defer func() {
		if err := be.close(); err != nil {
			fmt.Fprintf(os.Stderr, "loadbench serve %s: dropping the database: %v\n", dialect, err)
		}
	}()
	svc, err := harness.NewHTTPService(be.hb, append(harness.StoreFloors(be.hb), be.floors...))
	if err != nil {
		return err
	}
	if err := svc.Seed(ctx); err != nil {
		return fmt.Errorf("%s: %w", dialect, err)
	}
	info, err := json.Marshal(Info{
		Dialect: dialect, Prefix: svc.Prefix, Rows: harness.HTTPRows, Body: harness.RequestJSON,
		Cases: svc.Cases, Ratios: svc.Ratios,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+infoPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(info)
	})
	// loadbench -cpuprofile fetches the server's CPU profile of each
	// counted run from here, while wrk drives it.
	mux.HandleFunc("GET "+profilePath, pprof.Profile)
	mux.Handle("/", svc)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ConnState: svc.ConnState}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%shttp://%s\n", readyLine, ln.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	stdinDone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		close(stdinDone)
	}()
	select {
	case err := <-done:
		return err
	case <-stop:
	case <-stdinDone:
	}
	return srv.Shutdown(ctx)
}

// freshName is a new database or schema name.
func freshName() string {
	var b [6]byte
	rand.Read(b[:])
	return "idemgen_load_" + hex.EncodeToString(b[:])
}

func env(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set (the DSN the tests use)", name)
	}
	return v, nil
}

func openPostgres(ctx context.Context) (*backend, error) {
	dsn, err := env("IDEMGEN_TEST_POSTGRES")
	if err != nil {
		return nil, err
	}
	schema := freshName()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	drop := func() error {
		admin, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return err
		}
		defer admin.Close(context.Background())
		_, err = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		return err
	}
	be, err := func() (*backend, error) {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		cfg.MaxConns = harness.Clients
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		fail := func(err error) (*backend, error) { pool.Close(); return nil, err }
		if err := postgres.ApplySchema(ctx, pool); err != nil {
			return fail(err)
		}
		st, err := postgres.NewStore(ctx, pool)
		if err != nil {
			return fail(err)
		}
		hb, err := postgres.BenchBackend(ctx, pool, st)
		if err != nil {
			return fail(err)
		}
		floors, err := postgres.BenchFloors(pool)
		if err != nil {
			return fail(err)
		}
		return &backend{hb: hb, floors: floors, close: func() error { pool.Close(); return drop() }}, nil
	}()
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	return be, nil
}

func openSQLite(ctx context.Context) (*backend, error) {
	dir, err := os.MkdirTemp("", "idemgen-loadbench-")
	if err != nil {
		return nil, err
	}
	// The DSN the store's documentation recommends, as the tests use it.
	dsn := "file:" + filepath.Join(dir, "idem.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	be, err := openSQL(ctx, "sqlite", dsn, func(conn *sql.DB) (harness.HTTPBackend, []harness.HTTPFloor, func(), error) {
		if err := sqlite.ApplySchema(ctx, conn); err != nil {
			return harness.HTTPBackend{}, nil, nil, err
		}
		st, err := sqlite.NewStore(ctx, conn)
		if err != nil {
			return harness.HTTPBackend{}, nil, nil, err
		}
		hb, closeStmts, err := harness.NewSQLHTTPBackend(ctx, st, conn, sqlite.TxFromContext, "TEXT", "BLOB")
		if err != nil {
			return hb, nil, nil, err
		}
		floors, closeFloors, err := sqlite.BenchFloors(ctx, conn, hb)
		if err != nil {
			closeStmts()
			return hb, nil, nil, err
		}
		return hb, floors, func() { closeFloors(); closeStmts() }, nil
	}, func() error { return os.RemoveAll(dir) })
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return be, nil
}

func openMySQL(ctx context.Context) (*backend, error) {
	dsn, err := env("IDEMGEN_TEST_MYSQL")
	if err != nil {
		return nil, err
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	name := freshName()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	drop := func() error {
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer admin.Close()
		_, err = admin.ExecContext(context.Background(), "DROP DATABASE "+name)
		return err
	}
	cfg.DBName = name
	be, err := openSQL(ctx, "mysql", cfg.FormatDSN(), func(conn *sql.DB) (harness.HTTPBackend, []harness.HTTPFloor, func(), error) {
		if err := mysql.ApplySchema(ctx, conn); err != nil {
			return harness.HTTPBackend{}, nil, nil, err
		}
		st, err := mysql.NewStore(ctx, conn)
		if err != nil {
			return harness.HTTPBackend{}, nil, nil, err
		}
		hb, closeStmts, err := harness.NewSQLHTTPBackend(ctx, st, conn, mysql.TxFromContext, "VARBINARY(255)", "BLOB")
		if err != nil {
			return hb, nil, nil, err
		}
		floors, closeFloors, err := mysql.BenchFloors(ctx, conn, hb)
		if err != nil {
			closeStmts()
			return hb, nil, nil, err
		}
		return hb, floors, func() { closeFloors(); closeStmts() }, nil
	}, drop)
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	return be, nil
}

// openSQL opens a database/sql handle of harness.Clients connections and
// the backend and floors setup builds on it, with the function that closes
// their statements; drop runs after the handle is closed.
func openSQL(ctx context.Context, driver, dsn string, setup func(*sql.DB) (harness.HTTPBackend, []harness.HTTPFloor, func(), error), drop func() error) (*backend, error) {
	conn, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	hb, floors, closeStmts, err := setup(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &backend{hb: hb, floors: floors, close: func() error {
		closeStmts()
		return errors.Join(conn.Close(), drop())
	}}, nil
}
