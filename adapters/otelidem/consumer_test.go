package otelidem_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	"github.com/idemgen/idemgen/adapters/otelidem"
)

// The consumer hooks count each outcome per consumer and destination.
func TestConsumerHooks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelidem.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := m.ConsumerHooks()
	ev := func(err error) delivery.Event {
		return delivery.Event{Consumer: "ledger", Subject: "charges", Err: err}
	}
	h.Processed(ctx, ev(nil))
	h.Processed(ctx, ev(nil))
	h.Duplicate(ctx, ev(nil))
	h.Retried(ctx, ev(errors.New("boom")))
	h.DeadLettered(ctx, ev(errors.New("boom")))
	h.Refused(ctx, ev(errors.New("no id")))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, met := range sm.Metrics {
			if met.Name != "idempotency.consumer.deliveries" {
				continue
			}
			for _, dp := range met.Data.(metricdata.Sum[int64]).DataPoints {
				outcome, _ := dp.Attributes.Value("idempotency.consumer.outcome")
				consumer, _ := dp.Attributes.Value("idempotency.consumer")
				dest, _ := dp.Attributes.Value("messaging.destination.name")
				if consumer.AsString() != "ledger" || dest.AsString() != "charges" {
					t.Errorf("attributes %v", dp.Attributes)
				}
				got[outcome.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"processed": 2, "duplicate": 1, "retried": 1, "dead_lettered": 1, "refused": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
