package otelidem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/adapters/otelidem"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// A key derived from fields is a business value: spans carry its digest
// (idempotency.key_hash), and the key itself only with WithRawKeys.
func TestSpansCarryKeyDigest(t *testing.T) {
	const secret = "ch_secret_4242"
	key := `createRefund:"` + secret + `",5`
	for _, raw := range []bool{false, true} {
		spans := tracetest.NewSpanRecorder()
		tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
		var opts []otelidem.Option
		if raw {
			opts = append(opts, otelidem.WithRawKeys())
		}
		m, err := otelidem.New(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Hooks: m.Hooks()}, &idemrt.Policy{
			OperationID: "createRefund", Method: http.MethodPost, Route: "/refunds",
			Key: idemrt.KeyFromFields, KeyFields: []string{"charge", "amount"}, Principal: idemrt.PrincipalAnonymous,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
		for range 2 { // claimed and completed, then replayed
			r := httptest.NewRequest(http.MethodPost, "/refunds", strings.NewReader(`{"charge":"`+secret+`","amount":5}`))
			r.Header.Set("Content-Type", "application/json")
			ctx, span := tracer.Start(r.Context(), "POST /refunds")
			h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
			span.End()
		}
		ended := spans.Ended()
		if len(ended) != 2 {
			t.Fatalf("%d spans", len(ended))
		}
		for _, s := range ended {
			all := append([]attribute.KeyValue{}, s.Attributes()...)
			for _, e := range s.Events() {
				all = append(all, e.Attributes...)
			}
			var sawHash, sawRaw bool
			for _, kv := range all {
				if strings.Contains(kv.Value.String(), secret) {
					sawRaw = true
					if kv.Key != "idempotency.key" || kv.Value.AsString() != key {
						t.Errorf("%s = %q carries the business value", kv.Key, kv.Value.String())
					}
				}
				if kv.Key == "idempotency.key_hash" {
					sawHash = true
					if kv.Value.AsString() != idemrt.KeyDigest(key) {
						t.Errorf("idempotency.key_hash = %q, want KeyDigest of %q", kv.Value.AsString(), key)
					}
				}
			}
			if raw != sawRaw || raw == sawHash {
				t.Errorf("WithRawKeys %v: span has the raw key %v, the digest %v", raw, sawRaw, sawHash)
			}
		}
	}
}
