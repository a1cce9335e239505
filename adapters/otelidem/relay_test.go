package otelidem_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgen/idemgen/adapters/otelidem"
	idemrt "github.com/idemgen/idemgen/runtime"
)

type flakyPublisher struct{ fails int }

func (p *flakyPublisher) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	if p.fails > 0 {
		p.fails--
		return errors.New("no ack")
	}
	return nil
}

// A relay with otelidem's hooks counts what it published, its failures and
// the latency of every publish.
func TestRelayHooks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelidem.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := idemrt.NewMemoryStore()
	if _, err := idemrt.ProcessOnce(ctx, st, "producer", "m1", func(ctx context.Context) error {
		return idemrt.AddEvents(ctx, st, idemrt.OutboxEvent{Topic: "charge.created"}, idemrt.OutboxEvent{Topic: "charge.created"}, idemrt.OutboxEvent{Topic: "refund.created"})
	}); err != nil {
		t.Fatal(err)
	}
	r := &idemrt.Relay{Store: st, Publisher: &flakyPublisher{fails: 1}, Hooks: m.RelayHooks()}
	if _, err := r.RunOnce(ctx); err == nil {
		t.Fatal("the first round did not fail")
	}
	// The events have no key: the first round published the two after the
	// failing one, and the second publishes that one.
	if n, err := r.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	published := map[string]int64{}
	var failures, latencies int64
	for _, sm := range rm.ScopeMetrics {
		for _, met := range sm.Metrics {
			switch met.Name {
			case "idempotency.relay.published":
				for _, dp := range met.Data.(metricdata.Sum[int64]).DataPoints {
					topic, _ := dp.Attributes.Value("messaging.destination.name")
					published[topic.AsString()] += dp.Value
				}
			case "idempotency.relay.failures":
				for _, dp := range met.Data.(metricdata.Sum[int64]).DataPoints {
					if stage, _ := dp.Attributes.Value("idempotency.relay.stage"); stage.AsString() != "publish" {
						t.Errorf("failure stage %q", stage.AsString())
					}
					failures += dp.Value
				}
			case "idempotency.relay.latency":
				for _, dp := range met.Data.(metricdata.Histogram[float64]).DataPoints {
					latencies += int64(dp.Count)
				}
			}
		}
	}
	if published["charge.created"] != 2 || published["refund.created"] != 1 || failures != 1 || latencies != 3 {
		t.Fatalf("published %v, failures %d, latencies %d; want 2 charge.created, 1 refund.created, 1 failure, 3 latencies", published, failures, latencies)
	}
}
