package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// config is what the command line and the environment set.
type config struct {
	addr        string
	dbPath      string
	dsn         string
	chargeDelay time.Duration
	sweepEvery  time.Duration
	otel        bool
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "localhost:8080", "address to serve on (port 0 picks a free port; the log says which)")
	fs.StringVar(&c.dbPath, "db", "payments.db", "SQLite database file, used when no -dsn is given")
	fs.StringVar(&c.dsn, "dsn", getenv("PAYMENTS_DSN"), "PostgreSQL (postgres://...) or MySQL (mysql://user@tcp(host:3306)/db) DSN; default $PAYMENTS_DSN, else SQLite")
	fs.DurationVar(&c.chargeDelay, "charge-delay", 0, "for tests: make every charge take this long after its insert (to crash one mid-flight)")
	fs.DurationVar(&c.sweepEvery, "sweep-every", time.Minute, "how often expired idempotency records are deleted")
	fs.BoolVar(&c.otel, "otel", false, "report idempotency metrics and span events to the global OpenTelemetry providers (see otel.go)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: payments [flags]\n\nServes the payments example API (openapi.yaml).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, nil
}

// run serves until ctx is cancelled, then shuts down gracefully. It returns
// the process exit code: 0 after a clean shutdown, 1 on errors, 2 on usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("payments stopped", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	be, err := openBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer be.close()

	handler, err := newServer(be, cfg, log)
	if err != nil {
		return err
	}

	sweepCtx, stopSweep := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		be.sweep(sweepCtx, cfg.sweepEvery, log)
	}()
	defer func() { stopSweep(); <-sweepDone }()

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("payments listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(), "dialect", be.dialect, "db", be.where)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
