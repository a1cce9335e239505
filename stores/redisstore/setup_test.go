package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

// helperEnv makes the test binary a helper process (see TestMain) on the
// Redis of dsnEnv.
const (
	helperEnv = "IDEMGEN_REDIS_HELPER"
	dsnEnv    = "IDEMGEN_REDIS_DSN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

func helperMain(mode string) int {
	client, err := redisstore.NewClient(os.Getenv(dsnEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer client.Close()
	// The private test servers have no append-only file, and nothing
	// restarts them: no warning.
	st, err := redisstore.New(context.Background(), client, redisstore.Options{AllowNoAppendOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := backend(st, client)
	if mode == "storm" {
		return harness.ChildStorm(b, 25)
	}
	return harness.ChildMain(mode, b)
}

// starter starts helper processes on the Redis of dsn.
func starter(dsn string) func(t *testing.T, mode, key string) *harness.Child {
	return func(t *testing.T, mode, key string) *harness.Child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode, harness.ChildKeyEnv+"="+key, dsnEnv+"="+dsn)
		return harness.Start(t, cmd)
	}
}

// backend is the harness's Backend over st: each effect is an INCR of
// "effect:{<id>}" on client, so helper processes count on the same server.
func backend(st idemrt.Store, client redis.UniversalClient) *harness.Backend {
	return &harness.Backend{
		Store: st,
		Effect: func(ctx context.Context, id, worker string) error {
			return client.Incr(ctx, "effect:{"+id+"}").Err()
		},
		Effects: func(ctx context.Context, id string) (int, error) {
			n, err := client.Get(ctx, "effect:{"+id+"}").Int()
			if errors.Is(err, redis.Nil) {
				return 0, nil
			}
			return n, err
		},
	}
}

// dial returns a client for dsn, closed at the end of t.
func dial(t testing.TB, dsn string) redis.UniversalClient {
	t.Helper()
	c, err := redisstore.NewClient(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a store on a new client for dsn; New's warnings go to
// t's log unless opts has a Logger.
func newStore(t testing.TB, dsn string, opts redisstore.Options) (*redisstore.Store, redis.UniversalClient) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	c := dial(t, dsn)
	st, err := redisstore.New(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}

// testLogger logs to t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func clusterDSN(c *harness.RedisCluster) string {
	return "redis-cluster://" + strings.Join(c.Addrs(), ",")
}
