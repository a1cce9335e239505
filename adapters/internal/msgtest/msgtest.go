// Package msgtest holds what the broker adapters' tests share: the message
// stores they run against (the runtime's in-memory store, and the rendered
// PostgreSQL store in a fresh schema when IDEMGEN_TEST_POSTGRES is set),
// each with an effects table the handlers write in their transaction, and
// the broker URLs from the environment.
package msgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/stores/postgres"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// Backend is a message store under test and the consumer's own table.
type Backend struct {
	Name  string
	Store idemrt.MessageStore
	// Write records one effect of message id through the transaction in
	// ctx (the one ProcessOnce opened). On the in-memory store it counts at
	// once: that store's transaction has no handle to write through.
	Write func(ctx context.Context, id string) error
	// Effects counts the committed effects of id.
	Effects func(t testing.TB, id string) int
	// Total counts all committed effects.
	Total func(t testing.TB) int
	// Pool is the PostgreSQL pool (nil for memory).
	Pool *pgxpool.Pool
}

// Each runs f as a subtest per backend: "memory", and "postgres" (skipped,
// saying why, without IDEMGEN_TEST_POSTGRES).
func Each(t *testing.T, f func(t *testing.T, b *Backend)) {
	t.Run("memory", func(t *testing.T) { f(t, Memory()) })
	t.Run("postgres", func(t *testing.T) { f(t, Postgres(t)) })
}

// Memory returns the runtime's in-memory message store, wrapped so that
// Write's effects apply when the transaction commits (and vanish when it
// rolls back), like rows written through a SQL transaction.
func Memory() *Backend {
	st := &memStore{MemoryStore: idemrt.NewMemoryStore(), effects: map[string]int{}}
	return &Backend{
		Name:  "memory",
		Store: st,
		Write: func(ctx context.Context, id string) error {
			tx, ok := idemrt.TxFromContext(ctx)
			if !ok {
				return fmt.Errorf("no transaction in the handler's context")
			}
			mt, ok := tx.(*memTx)
			if !ok {
				return fmt.Errorf("the transaction in the context is a %T, not the test store's", tx)
			}
			mt.pending = append(mt.pending, id)
			return nil
		},
		Effects: func(t testing.TB, id string) int {
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.effects[id]
		},
		Total: func(t testing.TB) int {
			st.mu.Lock()
			defer st.mu.Unlock()
			n := 0
			for _, c := range st.effects {
				n += c
			}
			return n
		},
	}
}

type memStore struct {
	*idemrt.MemoryStore
	mu      sync.Mutex
	effects map[string]int
}

type memTx struct {
	idemrt.Tx
	s       *memStore
	pending []string
}

func (s *memStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	tx, err := s.MemoryStore.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	return &memTx{Tx: tx, s: s}, nil
}

func (s *memStore) MarkProcessed(ctx context.Context, tx idemrt.Tx, consumer, id string) (bool, error) {
	mt, ok := tx.(*memTx)
	if !ok {
		return false, fmt.Errorf("not the test store's transaction: %T", tx)
	}
	return s.MemoryStore.MarkProcessed(ctx, mt.Tx, consumer, id)
}

func (t *memTx) Commit(ctx context.Context) error {
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, id := range t.pending {
		t.s.effects[id]++
	}
	t.pending = nil
	return nil
}

// Postgres returns the rendered PostgreSQL store in a fresh schema
// (dropped at the end of the test), with a table effects(id) that Write
// inserts into through the handler's transaction. It skips without
// IDEMGEN_TEST_POSTGRES.
func Postgres(t testing.TB) *Backend {
	t.Helper()
	dsn := testutil.PostgresDSN(t)
	ctx := context.Background()
	schema := "idemgen_msg_" + Suffix()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (id text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.NewStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	count := func(t testing.TB, q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return &Backend{
		Name:  "postgres",
		Store: st,
		Pool:  pool,
		Write: func(ctx context.Context, id string) error {
			tx, ok := postgres.TxFromContext(ctx)
			if !ok {
				return fmt.Errorf("no PostgreSQL transaction in the handler's context")
			}
			_, err := tx.Exec(ctx, "INSERT INTO effects (id) VALUES ($1)", id)
			return err
		},
		Effects: func(t testing.TB, id string) int {
			return count(t, "SELECT count(*) FROM effects WHERE id = $1", id)
		},
		Total: func(t testing.TB) int { return count(t, "SELECT count(*) FROM effects") },
	}
}

// Suffix is a random hex suffix for the names of one test run's schemas,
// streams, queues and exchanges.
func Suffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NATSURL returns IDEMGEN_TEST_NATS or skips the test, saying why.
func NATSURL(t testing.TB) string {
	return env(t, "IDEMGEN_TEST_NATS", "a NATS server with JetStream, e.g. nats://127.0.0.1:4222")
}

// AMQPURL returns IDEMGEN_TEST_AMQP or skips the test, saying why.
func AMQPURL(t testing.TB) string {
	return env(t, "IDEMGEN_TEST_AMQP", "a RabbitMQ server, e.g. amqp://guest:guest@127.0.0.1:5672/")
}

func env(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s not set (%s)", name, what)
	}
	return v
}

// Compare measures a consumer with and without deduplication: it calls
// round rounds times per mode, alternating bare and dedup so that a
// change of machine load hits both, each round timing the consumption of
// n messages, and reports the medians as bare-msg/s, dedup-msg/s and
// dedup/bare (the ratio of the times per message: 1.5 means deduplication
// makes a message cost 1.5 times as long).
func Compare(b *testing.B, rounds, n int, round func(b *testing.B, r int, dedup bool) time.Duration) {
	b.Helper()
	var bare, dedup []float64
	for r := range rounds {
		for _, d := range []bool{false, true} {
			el := round(b, r, d)
			rate := float64(n) / el.Seconds()
			if d {
				dedup = append(dedup, rate)
			} else {
				bare = append(bare, rate)
			}
			b.Logf("round %d dedup=%v: %d messages in %v (%.0f msg/s)", r, d, n, el.Round(time.Millisecond), rate)
		}
	}
	mb, md := median(bare), median(dedup)
	b.ReportMetric(mb, "bare-msg/s")
	b.ReportMetric(md, "dedup-msg/s")
	b.ReportMetric(mb/md, "dedup/bare")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BareWrite is the bare consumer's write: the same insert as Backend.Write,
// in its own transaction, without MarkProcessed.
func (b *Backend) BareWrite(ctx context.Context, id string) error {
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "INSERT INTO effects (id) VALUES ($1)", id); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
