package otelidem

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
)

var (
	keyConsumer        = attribute.Key("idempotency.consumer")
	keyConsumerOutcome = attribute.Key("idempotency.consumer.outcome")
)

func newConsumerInstrument(meter metric.Meter) (metric.Int64Counter, error) {
	return meter.Int64Counter("idempotency.consumer.deliveries",
		metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries a broker adapter handled, by consumer, destination and outcome: processed (ran and committed), duplicate (acked without running), retried, dead_lettered, refused (no message id)."))
}

// ConsumerHooks returns hooks for the broker adapters (natsidem.Config.Hooks,
// amqpidem.Config.Hooks, watermillidem.Config.Hooks: the same type) that
// count deliveries in idempotency.consumer.deliveries, with attributes
// idempotency.consumer, messaging.destination.name (subject, routing key or
// topic), idempotency.consumer.outcome and, for failures, error.type:
//
//	p, err := natsidem.New(natsidem.Config{..., Hooks: m.ConsumerHooks()}, handle)
func (m *Metrics) ConsumerHooks() delivery.Hooks {
	count := func(outcome string) func(context.Context, delivery.Event) {
		return func(ctx context.Context, ev delivery.Event) {
			attrs := []attribute.KeyValue{keyConsumer.String(ev.Consumer), keyTopic.String(ev.Subject), keyConsumerOutcome.String(outcome)}
			if ev.Err != nil {
				attrs = append(attrs, keyErrorType.String(fmt.Sprintf("%T", ev.Err)))
			}
			m.consumer.Add(ctx, 1, metric.WithAttributes(attrs...))
		}
	}
	return delivery.Hooks{
		Processed:    count("processed"),
		Duplicate:    count("duplicate"),
		Retried:      count("retried"),
		DeadLettered: count("dead_lettered"),
		Refused:      count("refused"),
	}
}
