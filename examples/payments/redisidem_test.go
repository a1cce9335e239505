package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestRedisIdempotencyRecords: with -idem-dsn the records live in Redis
// and the charges in SQLite; a retried charge replays, and is charged once.
func TestRedisIdempotencyRecords(t *testing.T) {
	srv := harness.StartRedis(t)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg, err := parseFlags([]string{"-db", filepath.Join(t.TempDir(), "p.db"), "-idem-dsn", "redis://" + srv.Addr()}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be, err := openBackend(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := useRedis(ctx, be, cfg.idemDSN, log); err != nil {
		be.close()
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	h, err := newServer(be, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	call := func(path, key, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acct_r")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	charge := `{"amount":1000,"currency":"eur","customer":"c"}`
	first, body := call("/v1/charges", "rk-1", charge)
	if first.StatusCode != 201 {
		t.Fatalf("charge: %d %s", first.StatusCode, body)
	}
	again, body2 := call("/v1/charges", "rk-1", charge)
	if again.StatusCode != 201 || again.Header.Get("Idempotent-Replayed") != "true" || body2 != body {
		t.Fatalf("retried charge: %d replayed %q %s; want the first response replayed", again.StatusCode, again.Header.Get("Idempotent-Replayed"), body2)
	}
	var n int
	if err := be.data.(*sqlData).db.QueryRow("SELECT count(*) FROM charges").Scan(&n); err != nil || n != 1 {
		t.Fatalf("charges in SQLite: %d, %v; want 1", n, err)
	}
	if keys := srv.MustCLI(t, "--scan", "--pattern", "idem:*"); strings.Count(keys, "idem:") != 1 {
		t.Fatalf("Redis holds %q, want one idempotency record", keys)
	}
	// A refusal (400) writes nothing and saves nothing: the SQL transaction
	// rolls back.
	if res, body := call("/v1/refunds", "rk-2", `{"charge":"ch_missing","amount":1}`); res.StatusCode/100 != 4 {
		t.Fatalf("refund of a missing charge: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "operations=createCharge,createRefund,receivePaymentEvent") {
		t.Errorf("start-up does not warn about the transactional operations:\n%s", logs)
	}
}
