package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// With -otel, the service counts its idempotency events on the global
// meter provider (and still logs its own hooks).
func TestOTelFlag(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	cfg, err := parseFlags([]string{"-otel", "-db", filepath.Join(t.TempDir(), "p.db")}, func(string) string { return "" }, nil)
	if err != nil || !cfg.otel {
		t.Fatalf("parseFlags: %v %+v", err, cfg)
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	be, err := openBackend(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	h, err := newServer(be, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		req := httptest.NewRequest("POST", "/v1/charges", strings.NewReader(`{"amount":1000,"currency":"eur","customer":"c"}`))
		req.Header.Set("Authorization", "Bearer acct_t")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			t.Fatalf("charge: %d %s", w.Code, w.Body)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "idempotency.events" {
				for _, dp := range sum.DataPoints {
					v, _ := dp.Attributes.Value("idempotency.outcome")
					got[v.AsString()] += dp.Value
				}
			}
		}
	}
	if got["claimed"] != 1 || got["completed"] != 1 || got["replayed"] != 1 {
		t.Errorf("events %v, want one claimed, completed and replayed", got)
	}
	if !strings.Contains(logs.String(), "idempotent replay") {
		t.Errorf("the service's own replay log is gone:\n%s", logs)
	}
}
