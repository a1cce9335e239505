package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// In-process tests of the service wiring; the end-to-end tests in
// e2e_test.go run the real binary.

// newTestApp builds the service as serve does, from the flags args (after
// -db with a file in a temporary folder, and no environment), and serves it
// over HTTP. The logs collect what it logs.
func newTestApp(t *testing.T, args ...string) (srv *httptest.Server, be *backend, logs *lockedBuffer) {
	t.Helper()
	logs = &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg, err := parseFlags(append([]string{"-db", filepath.Join(t.TempDir(), "p.db")}, args...), env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	be, h, err := openApp(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, be, logs
}

// post sends a JSON body to srv's path as the bearer token's account, with
// key as its Idempotency-Key unless empty, and returns the response with
// its body read.
func post(t *testing.T, srv *httptest.Server, token, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// lockedBuffer collects the server's logs; handlers write while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A redelivery that comes after the event's idempotency record expired (and
// was swept) runs the handler again; the processed-messages record written
// in the same transaction as the event still keeps the event recorded once.
func TestWebhookRedeliveryAfterKeyExpiryIsStillOnce(t *testing.T) {
	srv, be, logs := newTestApp(t)
	ev := `{"id":"evt_late","type":"charge.refunded"}`
	deliver := func() {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+webhookPath, strings.NewReader(ev))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(signatureHeader, signHeader([]byte(demoWebhookSecret), time.Now(), []byte(ev)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("delivery: %d %s", res.StatusCode, b)
		}
	}
	deliver()
	db := be.data.(*sqlData).db
	res, err := db.Exec(`DELETE FROM idempotency_keys`) // what the sweeper does after the TTL
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d idempotency records, want the event's 1", n)
	}
	deliver()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM payment_events WHERE id = 'evt_late'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("event recorded %d times, want 1", n)
	}
	if !strings.Contains(logs.String(), `msg="payment event already processed" event=evt_late`) {
		t.Errorf("the late redelivery did not reach the processed-messages check; log:\n%s", logs)
	}
}

// A refund larger than what is left on the charge is refused, and the
// refused attempt (a saved 400) does not touch the charge.
func TestRefundCannotExceedCharge(t *testing.T) {
	srv, _, _ := newTestApp(t)
	call := func(path, key, body string) (int, string) {
		res, b := post(t, srv, "acct_t", path, key, body)
		return res.StatusCode, b
	}
	st, body := call("/v1/charges", "k", `{"amount":1000,"currency":"eur","customer":"c"}`)
	if st != 201 {
		t.Fatalf("charge: %d %s", st, body)
	}
	id := body[strings.Index(body, `"ch_`)+1:]
	id = id[:strings.Index(id, `"`)]
	if st, body := call("/v1/refunds", "", `{"charge":"`+id+`","amount":600}`); st != 201 {
		t.Fatalf("refund 600: %d %s", st, body)
	}
	if st, body := call("/v1/refunds", "", `{"charge":"`+id+`","amount":600}`); st != 201 || !strings.Contains(body, `"amount":600`) {
		t.Fatalf("the same refund again should replay: %d %s", st, body)
	}
	if st, body := call("/v1/refunds", "", `{"charge":"`+id+`","amount":500}`); st != 400 {
		t.Fatalf("refund 500 more on a 1000 charge with 600 refunded: %d %s, want 400", st, body)
	}
	if st, body := call("/v1/refunds", "", `{"charge":"`+id+`","amount":400}`); st != 201 {
		t.Fatalf("refund the remaining 400: %d %s", st, body)
	}
}

func TestRunFlags(t *testing.T) {
	getenv := func(string) string { return "" }
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, getenv, &out, &out); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if !strings.Contains(out.String(), "-charge-delay") {
		t.Errorf("-h does not list the flags:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"extra"}, getenv, &out, &out); code != 2 {
		t.Errorf("stray argument: exit %d, want 2", code)
	}
	out.Reset()
	if code := run(context.Background(), []string{"-max-conns", "0"}, getenv, &out, &out); code != 2 {
		t.Errorf("-max-conns 0: exit %d, want 2", code)
	}
	out.Reset()
	if code := run(context.Background(), nil, env(map[string]string{"PAYMENTS_READ_TIMEOUT": "soon"}), &out, &out); code != 2 || !strings.Contains(out.String(), "$PAYMENTS_READ_TIMEOUT") {
		t.Errorf("PAYMENTS_READ_TIMEOUT=soon: exit %d, output %q (want 2, naming the variable)", code, out.String())
	}
	out.Reset()
	code := run(context.Background(), []string{"-dsn", "oracle://scott:tiger@db/x"}, getenv, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "want postgres://") || strings.Contains(out.String(), "tiger") {
		t.Errorf("unknown DSN scheme: exit %d, output %q (want 1, a hint, no password)", code, out.String())
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The environment sets any flag as PAYMENTS_<NAME>, and the command line
// wins over it; the webhook secret comes from the environment only.
func TestFlagsFromEnvironment(t *testing.T) {
	cfg, err := parseFlags([]string{"-read-timeout", "3s"}, env(map[string]string{
		"PAYMENTS_MAX_CONNS": "7", "PAYMENTS_READ_TIMEOUT": "1s", "PAYMENTS_WEBHOOK_SECRET": "whsec_x",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.maxConns != 7 || cfg.readTimeout != 3*time.Second || cfg.webhookSecret != "whsec_x" {
		t.Errorf("max-conns %d, read-timeout %v, secret %q; want 7 (env), 3s (flag over env), whsec_x",
			cfg.maxConns, cfg.readTimeout, cfg.webhookSecret)
	}
	if cfg, _ := parseFlags(nil, env(nil), io.Discard); cfg.webhookSecret != demoWebhookSecret || cfg.maxConns != 20 {
		t.Errorf("defaults: secret %q, max-conns %d", cfg.webhookSecret, cfg.maxConns)
	}
}
