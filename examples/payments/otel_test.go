package main

import (
	"context"
	"fmt"
	"net/http"
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

	srv, _, logs := newTestApp(t, "-otel")
	for range 2 {
		if res, body := post(t, srv, "acct_t", "/v1/charges", "k", `{"amount":1000,"currency":"eur","customer":"c"}`); res.StatusCode != http.StatusCreated {
			t.Fatalf("charge: %d %s", res.StatusCode, body)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got, calls := map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					v, _ := dp.Attributes.Value("idempotency.outcome")
					got[v.AsString()] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					v, _ := dp.Attributes.Value("idempotency.store.call")
					calls[v.AsString()] += int64(dp.Count)
				}
			}
		}
	}
	if got["claimed"] != 1 || got["completed"] != 1 || got["replayed"] != 1 {
		t.Errorf("events %v, want one claimed, completed and replayed", got)
	}
	// createCharge is transactional, and the timed store keeps SQLite's
	// one-commit mode: both charges claim through BeginClaim, and the first
	// commits once (no Claim then BeginTx).
	if want := "map[begin_claim:2 commit:1 tx_complete:1]"; fmt.Sprint(calls) != want {
		t.Errorf("store calls %v, want %s", calls, want)
	}
	if !strings.Contains(logs.String(), "idempotent replay") {
		t.Errorf("the service's own replay log is gone:\n%s", logs)
	}
}
