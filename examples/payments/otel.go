package main

import (
	"go.opentelemetry.io/otel"

	"github.com/idemgen/idemgen/adapters/otelidem"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// withOTel (flag -otel) reports the idempotency middleware to OpenTelemetry:
// the idempotency.events counter, the idempotency.store.duration histogram,
// and events on each request's span. They go to the global providers; this
// example installs no SDK, so a real service sets one first
// (otel.SetMeterProvider with an exporter, and otelhttp around the handler
// for the spans).
func withOTel(opts idemrt.Options) (idemrt.Options, error) {
	m, err := otelidem.New(otel.GetMeterProvider())
	if err != nil {
		return opts, err
	}
	opts.Store = m.Store(opts.Store)
	opts.Hooks = otelidem.Join(opts.Hooks, m.Hooks())
	return opts, nil
}
