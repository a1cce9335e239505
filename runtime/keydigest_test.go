package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// A key derived from fields is a business value: the runtime's logs name
// it by its digest unless Options.LogRawKeys says otherwise.
func TestLogsCarryKeyDigest(t *testing.T) {
	refund := func(p *idemrt.Policy) {
		p.Route, p.Key, p.KeyName, p.KeyFields = "/refunds", idemrt.KeyFromFields, "", []string{"charge", "amount"}
	}
	for _, raw := range []bool{false, true} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var key string
		hooks := idemrt.Hooks{Replayed: func(_ context.Context, e idemrt.Event) { key = e.Key }}
		srv := wrap(t, idemrt.Options{Logger: logger, LogRawKeys: raw, Hooks: hooks}, policy(refund), &counting{})
		body := `{"charge":"ch_secret_4242","amount":5}`
		do(srv, req{path: "/refunds", body: body})
		if w := do(srv, req{path: "/refunds", body: body}); w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("no replay: %d %s", w.Code, w.Body)
		}
		if !strings.Contains(key, "ch_secret_4242") {
			t.Fatalf("the hook's key %q is not the raw derived key", key)
		}
		logs := buf.String()
		if !strings.Contains(logs, "replayed") {
			t.Fatalf("no replay logged:\n%s", logs)
		}
		if raw {
			if !strings.Contains(logs, "ch_secret_4242") || strings.Contains(logs, "key_hash=") {
				t.Errorf("LogRawKeys: the log does not carry the raw key:\n%s", logs)
			}
			continue
		}
		if strings.Contains(logs, "ch_secret_4242") {
			t.Errorf("the log carries the business value of a fields key:\n%s", logs)
		}
		if !strings.Contains(logs, "key_hash="+idemrt.KeyDigest(key)) {
			t.Errorf("the log lacks key_hash=%s:\n%s", idemrt.KeyDigest(key), logs)
		}
	}
}

func TestKeyDigest(t *testing.T) {
	a, b := idemrt.KeyDigest("order-1"), idemrt.KeyDigest("order-2")
	if len(a) != 32 || a == b || a != idemrt.KeyDigest("order-1") || strings.Contains(a, "order") {
		t.Fatalf("digests %q %q", a, b)
	}
}
