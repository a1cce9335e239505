package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/crashpoint"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// config is what the command line and the environment set.
type config struct {
	addr    string
	dbPath  string
	dsn     string
	idemDSN string
	// -idem-redis-without-transactions: accept running the spec's
	// transactional operations without their transaction under -idem-dsn.
	idemRedisWithoutTx bool
	chargeDelay        time.Duration
	sweepEvery         time.Duration
	// -crash-at: a test hook, the point where the process kills itself.
	crashAt *crashpoint.Point

	// The database pool.
	maxConns        int
	maxIdleConns    int
	connMaxLifetime time.Duration

	// The HTTP server's timeouts.
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration

	// The webhook's signature: the secret shared with the provider (from
	// $PAYMENTS_WEBHOOK_SECRET only, never a flag that ps would show) and
	// how old or new a signed timestamp may be.
	webhookSecret    string
	webhookTolerance time.Duration

	// -otel: idempotency metrics and span events.
	otel bool

	// -idem-encryption-keys: the key ring that seals saved responses, read
	// at start-up (nil: saved in clear).
	idemKeys *idemrt.KeyRing
}

// demoWebhookSecret signs the webhook when $PAYMENTS_WEBHOOK_SECRET is unset.
const demoWebhookSecret = "whsec_demo"

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := config{webhookSecret: cmp.Or(getenv("PAYMENTS_WEBHOOK_SECRET"), demoWebhookSecret)}
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "localhost:8080", "address to serve on (port 0 picks a free port; the log says which)")
	fs.StringVar(&c.dbPath, "db", "payments.db", "SQLite database file, used when no -dsn is given")
	fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL (postgres://...) or MySQL (mysql://user@tcp(host:3306)/db) DSN; else SQLite")
	fs.StringVar(&c.idemDSN, "idem-dsn", "", "keep the idempotency records in Redis (redis://host:6379) or Redis Cluster (redis-cluster://host:port,host:port) instead of the SQL database; see redisidem.go for what changes")
	fs.BoolVar(&c.idemRedisWithoutTx, "idem-redis-without-transactions", false, "with -idem-dsn: accept that the spec's transactional operations run without their shared transaction (a crash between a handler's commit and its saved response runs it again); without it, -idem-dsn refuses to start")
	fs.DurationVar(&c.chargeDelay, "charge-delay", 0, "for tests: make every charge take this long after its insert (to crash one mid-flight)")
	crashAt := fs.String("crash-at", "", "for tests: SIGKILL the process itself once at this point: "+crashAfterCommit+"[:N], the N-th (default 1st) charge or refund committed, before its response is written")
	fs.DurationVar(&c.sweepEvery, "sweep-every", time.Minute, "how often expired idempotency records are deleted")
	fs.IntVar(&c.maxConns, "max-conns", 20, "most database connections open at once; requests beyond wait for one")
	fs.IntVar(&c.maxIdleConns, "max-idle-conns", 20, "most idle connections kept open (SQLite, MySQL)")
	fs.DurationVar(&c.connMaxLifetime, "conn-max-lifetime", 30*time.Minute, "how long a database connection is reused before it is replaced")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time allowed to read a request's headers")
	fs.DurationVar(&c.readTimeout, "read-timeout", 10*time.Second, "time allowed to read a whole request, headers and body")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 30*time.Second, "time allowed from the end of the request headers to the end of the response")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&c.webhookTolerance, "webhook-tolerance", 5*time.Minute, "how far a webhook signature's timestamp may be from now")
	var keysFile string
	fs.StringVar(&keysFile, "idem-encryption-keys", "", "file of the keys that encrypt saved responses at rest: one KEYID:BASE64 line per 32-byte key, the first encrypts, all decrypt (rotate by putting a new key first)")
	fs.BoolVar(&c.otel, "otel", false, "report idempotency metrics and span events to the global OpenTelemetry providers (see otel.go)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: payments [flags]\n\nServes the payments example API (openapi.yaml).\n"+
			"Every flag can also be set as PAYMENTS_<NAME> in the environment (PAYMENTS_MAX_CONNS=40);\n"+
			"the command line wins. The webhook secret is $PAYMENTS_WEBHOOK_SECRET (default %q).\n\nflags:\n", demoWebhookSecret)
		fs.PrintDefaults()
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "PAYMENTS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("$%s: %v", env, e)
			}
		}
	})
	if err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.crashAt, err = crashpoint.Parse(*crashAt, crashAfterCommit); err != nil {
		return c, fmt.Errorf("-crash-at: %v", err)
	}
	if keysFile != "" {
		if c.idemKeys, err = idemrt.LoadKeyRing(keysFile); err != nil {
			return c, fmt.Errorf("-idem-encryption-keys: %w", err)
		}
	}
	switch {
	case c.idemRedisWithoutTx && c.idemDSN == "":
		return c, errors.New("-idem-redis-without-transactions needs -idem-dsn")
	case c.maxConns < 1 || c.maxIdleConns < 0:
		return c, errors.New("-max-conns must be at least 1 and -max-idle-conns at least 0")
	case min(c.connMaxLifetime, c.readHeaderTimeout, c.readTimeout, c.writeTimeout, c.idleTimeout, c.webhookTolerance) <= 0:
		return c, errors.New("-conn-max-lifetime, the timeouts and -webhook-tolerance must be positive")
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

// openApp opens the backend cfg names (with the idempotency records in
// Redis under -idem-dsn) and builds the handler serve runs. The caller
// closes the backend.
func openApp(ctx context.Context, cfg config, log *slog.Logger) (*backend, http.Handler, error) {
	be, err := openBackend(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if cfg.idemDSN != "" {
		if err := useRedis(ctx, be, cfg.idemDSN, cfg.idemRedisWithoutTx, log); err != nil {
			be.close()
			return nil, nil, err
		}
	}
	handler, err := newServer(be, cfg, log)
	if err != nil {
		be.close()
		return nil, nil, err
	}
	return be, handler, nil
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	be, handler, err := openApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer be.close()

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
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       cfg.idleTimeout,
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
