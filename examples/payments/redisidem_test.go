package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestRedisIdempotencyRecords: with -idem-dsn the records live in Redis
// and the charges in SQLite; a retried charge replays, and is charged once.
func TestRedisIdempotencyRecords(t *testing.T) {
	redis := harness.StartRedis(t)
	srv, be, logs := newTestApp(t, "-idem-dsn", "redis://"+redis.Addr(), "-idem-redis-without-transactions")
	charge := `{"amount":1000,"currency":"eur","customer":"c"}`
	first, body := post(t, srv, "acct_r", "/v1/charges", "rk-1", charge)
	if first.StatusCode != 201 {
		t.Fatalf("charge: %d %s", first.StatusCode, body)
	}
	again, body2 := post(t, srv, "acct_r", "/v1/charges", "rk-1", charge)
	if again.StatusCode != 201 || again.Header.Get("Idempotent-Replayed") != "true" || body2 != body {
		t.Fatalf("retried charge: %d replayed %q %s; want the first response replayed", again.StatusCode, again.Header.Get("Idempotent-Replayed"), body2)
	}
	var n int
	if err := be.data.(*sqlData).db.QueryRow("SELECT count(*) FROM charges").Scan(&n); err != nil || n != 1 {
		t.Fatalf("charges in SQLite: %d, %v; want 1", n, err)
	}
	// One record, beside the marker that every claim checks.
	if keys := redis.MustCLI(t, "--scan", "--pattern", "idem:{*"); strings.Count(keys, "idem:") != 1 {
		t.Fatalf("Redis holds %q, want one idempotency record", keys)
	}
	if got := redis.MustCLI(t, "GET", "idem:marker"); got != "live" {
		t.Fatalf("the store's marker idem:marker holds %q, want live", got)
	}
	// A refusal (400) writes nothing and saves nothing: the SQL transaction
	// rolls back.
	if res, body := post(t, srv, "acct_r", "/v1/refunds", "rk-2", `{"charge":"ch_missing","amount":1}`); res.StatusCode/100 != 4 {
		t.Fatalf("refund of a missing charge: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "operations=createCharge,createRefund,receivePaymentEvent") {
		t.Errorf("start-up does not warn about the transactional operations:\n%s", logs)
	}
	// The test's Redis has no append-only file: the store warns in the log.
	if !strings.Contains(logs.String(), "no append-only file") {
		t.Errorf("start-up does not warn that Redis has no append-only file:\n%s", logs)
	}
}

// Without -idem-redis-without-transactions, -idem-dsn refuses to start
// (before it connects to Redis) and names the transactional operations it
// would weaken; the opt-in flag alone is a usage error.
func TestRedisRefusesTransactionalOperations(t *testing.T) {
	var out lockedBuffer
	args := []string{"-addr", "127.0.0.1:0", "-db", t.TempDir() + "/p.db", "-idem-dsn", "redis://127.0.0.1:1"}
	if code := run(context.Background(), args, env(nil), io.Discard, &out); code != 1 {
		t.Errorf("-idem-dsn: exit %d, want 1", code)
	}
	for _, want := range []string{"createCharge, createRefund, receivePaymentEvent", "-idem-redis-without-transactions"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out.String())
		}
	}
	out = lockedBuffer{}
	if code := run(context.Background(), []string{"-idem-redis-without-transactions"}, env(nil), io.Discard, &out); code != 2 {
		t.Errorf("-idem-redis-without-transactions without -idem-dsn: exit %d, want 2\n%s", code, out.String())
	}
}
