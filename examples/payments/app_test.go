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

func newTestApp(t *testing.T) (*httptest.Server, *backend, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg, err := parseFlags([]string{"-db", filepath.Join(t.TempDir(), "p.db")}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	be, err := openBackend(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	h, err := newServer(be, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, be, logs
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
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acct_t")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
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
	code := run(context.Background(), []string{"-dsn", "oracle://scott:tiger@db/x"}, getenv, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "want postgres://") || strings.Contains(out.String(), "tiger") {
		t.Errorf("unknown DSN scheme: exit %d, output %q (want 1, a hint, no password)", code, out.String())
	}
}
