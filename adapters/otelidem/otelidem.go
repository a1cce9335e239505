// Package otelidem reports what the idempotency middleware does to
// OpenTelemetry, without hand-written hooks:
//
//	m, err := otelidem.New(otel.GetMeterProvider())
//	...
//	opts := idemrt.Options{Store: m.Store(store), Hooks: m.Hooks()}
//
// Hooks counts every event of the runtime in idempotency.events (attributes
// idempotency.outcome and idempotency.operation) and marks the request's
// span (trace.SpanFromContext): one span event per outcome, the attributes
// idempotency.outcome, idempotency.key_hash (the key's digest,
// idemrt.KeyDigest: on spans only, never on metrics, whose attributes stay
// few; WithRawKeys puts the key itself in idempotency.key instead) and, on replays,
// idempotency.replayed=true. Store times every store call in the histogram
// idempotency.store.duration (seconds; attributes idempotency.store.call
// and, on failure, error.type).
//
// The outcomes are the runtime's hooks. A request that reaches the store
// ends its claim with exactly one of claimed, taken_over, replayed,
// conflict, mismatch, unavailable or store_error; a claimed or taken-over
// request then counts once more, as completed, released, fenced or
// store_error (saving failed). store_error therefore counts both failed
// claims (answered 503) and failed saves or releases; on the span, only a
// failed claim (an event without an epoch) sets idempotency.outcome, and
// the histogram's idempotency.store.call tells the store calls apart.
package otelidem

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/idemgen/idemgen/adapters/otelidem"

// Outcomes, the values of the idempotency.outcome attribute.
const (
	OutcomeClaimed     = "claimed"
	OutcomeTakenOver   = "taken_over"
	OutcomeReplayed    = "replayed"
	OutcomeConflict    = "conflict"
	OutcomeMismatch    = "mismatch"
	OutcomeUnavailable = "unavailable"
	OutcomeStoreError  = "store_error"
	OutcomeFenced      = "fenced"
	OutcomeCompleted   = "completed"
	OutcomeReleased    = "released"
)

// Attribute keys.
const (
	keyOutcome   = attribute.Key("idempotency.outcome")
	keyOperation = attribute.Key("idempotency.operation")
	keyKey       = attribute.Key("idempotency.key")
	keyKeyHash   = attribute.Key("idempotency.key_hash")
	keyEpoch     = attribute.Key("idempotency.epoch")
	keyStatus    = attribute.Key("http.response.status_code")
	keyReplayed  = attribute.Key("idempotency.replayed")
	keyStoreCall = attribute.Key("idempotency.store.call")
	keyErrorType = attribute.Key("error.type")
)

// Metrics holds the instruments. It is safe for concurrent use.
type Metrics struct {
	events   metric.Int64Counter
	duration metric.Float64Histogram
	relay    relayInstruments
	consumer metric.Int64Counter
	rawKeys  bool
}

// Option configures New.
type Option func(*Metrics)

// WithRawKeys marks spans with the idempotency key itself
// (idempotency.key) instead of its digest (idempotency.key_hash). A key
// derived from fields is a business value (an order id, an amount), and a
// client's key may be one too: use it only where traces may show them.
func WithRawKeys() Option { return func(m *Metrics) { m.rawKeys = true } }

// New creates the instruments on mp (nil: a no-op provider, so that only
// the spans are marked).
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	events, err := meter.Int64Counter("idempotency.events",
		metric.WithUnit("{event}"),
		metric.WithDescription("Idempotency events by outcome: how claims ended (claimed, taken_over, replayed, conflict, mismatch, unavailable, store_error) and how claimed requests settled (completed, released, fenced, store_error)."))
	if err != nil {
		return nil, err
	}
	duration, err := meter.Float64Histogram("idempotency.store.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of idempotency store calls."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
	if err != nil {
		return nil, err
	}
	relay, err := newRelayInstruments(meter)
	if err != nil {
		return nil, err
	}
	consumer, err := newConsumerInstrument(meter)
	if err != nil {
		return nil, err
	}
	m := &Metrics{events: events, duration: duration, relay: relay, consumer: consumer}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// keyAttr is the span attribute that names ev's key.
func (m *Metrics) keyAttr(key string) attribute.KeyValue {
	if m.rawKeys {
		return keyKey.String(key)
	}
	return keyKeyHash.String(idemrt.KeyDigest(key))
}

// Hooks returns runtime hooks that count each event and mark the request's
// span. Give them to idemrt.Options.Hooks (or generated code's options).
func (m *Metrics) Hooks() idemrt.Hooks {
	return idemrt.Hooks{
		Claimed:     m.hook(OutcomeClaimed),
		TakenOver:   m.hook(OutcomeTakenOver),
		Replayed:    m.hook(OutcomeReplayed),
		Conflict:    m.hook(OutcomeConflict),
		Mismatch:    m.hook(OutcomeMismatch),
		Unavailable: m.hook(OutcomeUnavailable),
		StoreError:  m.hook(OutcomeStoreError),
		Fenced:      m.hook(OutcomeFenced),
		Completed:   m.hook(OutcomeCompleted),
		Released:    m.hook(OutcomeReleased),
	}
}

func (m *Metrics) hook(outcome string) func(context.Context, idemrt.Event) {
	outcomeAttr := keyOutcome.String(outcome)
	eventName := "idempotency." + outcome
	return func(ctx context.Context, ev idemrt.Event) {
		m.events.Add(ctx, 1, metric.WithAttributes(outcomeAttr, keyOperation.String(ev.OperationID)))
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return
		}
		key := m.keyAttr(ev.Key)
		attrs := []attribute.KeyValue{keyOperation.String(ev.OperationID), key}
		if ev.Epoch != 0 {
			attrs = append(attrs, keyEpoch.Int64(ev.Epoch))
		}
		if ev.Status != 0 {
			attrs = append(attrs, keyStatus.Int(ev.Status))
		}
		if ev.Err != nil {
			attrs = append(attrs, keyErrorType.String(errorType(ev.Err)))
			span.RecordError(ev.Err, trace.WithAttributes(attrs...))
		}
		span.AddEvent(eventName, trace.WithAttributes(attrs...))
		if settles(outcome, ev) {
			// The claim's outcome stays on the span; the settlement is an event.
			return
		}
		span.SetAttributes(outcomeAttr, key, keyOperation.String(ev.OperationID))
		if outcome == OutcomeReplayed {
			span.SetAttributes(keyReplayed.Bool(true))
		}
	}
}

// settles reports whether the event is what became of a claimed request
// rather than how its claim ended. A store error is a settlement when it
// carries the claim's epoch (saving or releasing failed; the client still
// got the handler's response); without one the request was answered 503.
func settles(outcome string, ev idemrt.Event) bool {
	switch outcome {
	case OutcomeCompleted, OutcomeReleased, OutcomeFenced:
		return true
	case OutcomeStoreError:
		return ev.Epoch != 0
	}
	return false
}

// errorType is the error.type attribute of a store failure.
func errorType(err error) string {
	switch {
	case errors.Is(err, idemrt.ErrFenced):
		return "fenced"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// Join returns hooks that call each of hs's hooks in order, so that
// otelidem's hooks can sit beside an application's own (logging, say).
func Join(hs ...idemrt.Hooks) idemrt.Hooks {
	pick := func(get func(idemrt.Hooks) func(context.Context, idemrt.Event)) func(context.Context, idemrt.Event) {
		var fs []func(context.Context, idemrt.Event)
		for _, h := range hs {
			if f := get(h); f != nil {
				fs = append(fs, f)
			}
		}
		switch len(fs) {
		case 0:
			return nil
		case 1:
			return fs[0]
		}
		return func(ctx context.Context, ev idemrt.Event) {
			for _, f := range fs {
				f(ctx, ev)
			}
		}
	}
	return idemrt.Hooks{
		Claimed:     pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Claimed }),
		TakenOver:   pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.TakenOver }),
		Replayed:    pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Replayed }),
		Conflict:    pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Conflict }),
		Mismatch:    pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Mismatch }),
		Unavailable: pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Unavailable }),
		StoreError:  pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.StoreError }),
		Fenced:      pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Fenced }),
		Completed:   pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Completed }),
		Released:    pick(func(h idemrt.Hooks) func(context.Context, idemrt.Event) { return h.Released }),
	}
}
