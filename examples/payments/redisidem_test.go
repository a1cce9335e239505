package main

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestRedisIdempotencyRecords: with -idem-dsn the records live in Redis
// and the charges in SQLite; a retried charge replays, and is charged once.
func TestRedisIdempotencyRecords(t *testing.T) {
	redis := harness.StartRedis(t)
	srv, be, logs := newTestApp(t, "-idem-dsn", "redis://"+redis.Addr())
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
	if keys := redis.MustCLI(t, "--scan", "--pattern", "idem:*"); strings.Count(keys, "idem:") != 1 {
		t.Fatalf("Redis holds %q, want one idempotency record", keys)
	}
	// A refusal (400) writes nothing and saves nothing: the SQL transaction
	// rolls back.
	if res, body := post(t, srv, "acct_r", "/v1/refunds", "rk-2", `{"charge":"ch_missing","amount":1}`); res.StatusCode/100 != 4 {
		t.Fatalf("refund of a missing charge: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "operations=createCharge,createRefund,receivePaymentEvent") {
		t.Errorf("start-up does not warn about the transactional operations:\n%s", logs)
	}
}
