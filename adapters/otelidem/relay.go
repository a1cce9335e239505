package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Relay instruments (see RelayHooks).
type relayInstruments struct {
	published metric.Int64Counter
	failures  metric.Int64Counter
	latency   metric.Float64Histogram
	swept     metric.Int64Counter
}

var (
	keyTopic      = attribute.Key("messaging.destination.name")
	keyRelayStage = attribute.Key("idempotency.relay.stage")
)

func newRelayInstruments(meter metric.Meter) (relayInstruments, error) {
	var ri relayInstruments
	var err error
	if ri.published, err = meter.Int64Counter("idempotency.relay.published",
		metric.WithUnit("{event}"),
		metric.WithDescription("Outbox events the relay published (the broker acknowledged them), by topic.")); err != nil {
		return ri, err
	}
	if ri.failures, err = meter.Int64Counter("idempotency.relay.failures",
		metric.WithUnit("{failure}"),
		metric.WithDescription("Failures of the outbox relay by stage: publish (the broker refused or did not acknowledge), claim, mark_sent, release, sweep.")); err != nil {
		return ri, err
	}
	if ri.latency, err = meter.Float64Histogram("idempotency.relay.latency",
		metric.WithUnit("s"),
		metric.WithDescription("Time from an outbox event's insert (the business transaction) to the broker's acknowledgement of its publish."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)); err != nil {
		return ri, err
	}
	if ri.swept, err = meter.Int64Counter("idempotency.relay.swept",
		metric.WithUnit("{event}"),
		metric.WithDescription("Sent outbox events the relay deleted after their retention.")); err != nil {
		return ri, err
	}
	return ri, nil
}

// RelayHooks returns hooks for idemrt.Relay that count published events
// (idempotency.relay.published, attribute messaging.destination.name),
// failures (idempotency.relay.failures, attributes idempotency.relay.stage
// and error.type), the latency from an event's insert to its publish
// (idempotency.relay.latency, seconds) and swept events
// (idempotency.relay.swept):
//
//	relay := &idemrt.Relay{Store: store, Publisher: pub, Hooks: m.RelayHooks()}
func (m *Metrics) RelayHooks() idemrt.RelayHooks {
	r := m.relay
	return idemrt.RelayHooks{
		Published: func(ctx context.Context, ev idemrt.OutboxEvent, latency time.Duration) {
			topic := metric.WithAttributes(keyTopic.String(ev.Topic))
			r.published.Add(ctx, 1, topic)
			r.latency.Record(ctx, max(latency, 0).Seconds(), topic)
		},
		PublishFailed: func(ctx context.Context, ev idemrt.OutboxEvent, err error) {
			r.failures.Add(ctx, 1, metric.WithAttributes(keyRelayStage.String("publish"), keyTopic.String(ev.Topic), keyErrorType.String(errorType(err))))
		},
		StoreFailed: func(ctx context.Context, op string, err error) {
			r.failures.Add(ctx, 1, metric.WithAttributes(keyRelayStage.String(op), keyErrorType.String(errorType(err))))
		},
		Swept: func(ctx context.Context, n int) {
			r.swept.Add(ctx, int64(n))
		},
	}
}
