package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// DefaultMaxDeliveries bounds the deliveries of a message whose handler
// keeps failing when Policy.MaxDeliveries is 0.
const DefaultMaxDeliveries = 5

// Policy bounds and spaces the redeliveries of a failing message.
type Policy struct {
	// MaxDeliveries is the number of deliveries a handler failure may use:
	// a failure on delivery MaxDeliveries (or later) sends the message to
	// the dead letter. 0 means DefaultMaxDeliveries.
	MaxDeliveries int
	// Backoff is the delay before delivery n+1 after delivery n (n >= 1)
	// failed. nil means DefaultBackoff.
	Backoff func(delivery int) time.Duration
}

// DefaultBackoff doubles from 1s after the first delivery up to 1 minute.
func DefaultBackoff(delivery int) time.Duration {
	d := time.Second
	for i := 1; i < delivery && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// Check reports bad policy values.
func (p Policy) Check() error {
	if p.MaxDeliveries < 0 {
		return fmt.Errorf("MaxDeliveries is %d; want 0 (the default, %d) or more", p.MaxDeliveries, DefaultMaxDeliveries)
	}
	return nil
}

func (p Policy) max() int {
	if p.MaxDeliveries == 0 {
		return DefaultMaxDeliveries
	}
	return p.MaxDeliveries
}

// Delay is the backoff after failed delivery n.
func (p Policy) Delay(delivery int) time.Duration {
	if p.Backoff == nil {
		return DefaultBackoff(delivery)
	}
	return max(p.Backoff(delivery), 0)
}

// Action is what the adapter tells the broker about one delivery.
type Action uint8

const (
	// Ack: the handler ran and its transaction committed, or the id was
	// processed before (a duplicate, acked without running).
	Ack Action = iota
	// Retry: the handler failed, or the store did; nothing was committed.
	// Redeliver after Result.Delay.
	Retry
	// DeadLetter: the handler failed on the last allowed delivery.
	DeadLetter
	// Refuse: the message has no usable id; it is dead-lettered (or
	// terminated) without running, never processed without deduplication.
	Refuse
)

func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dead-letter"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Result is the outcome of one delivery.
type Result struct {
	Action Action
	// Ran: the handler ran and its transaction committed. Ack without Ran
	// is a duplicate.
	Ran bool
	// Delay before the redelivery (Retry).
	Delay time.Duration
	// Err: the handler's or the store's error (Retry, DeadLetter), or why
	// the message was refused (Refuse).
	Err error
	// StoreErr: Err came from the store (BeginTx, MarkProcessed, Commit),
	// not from the handler. A store failure is retried, never dead-lettered:
	// the message itself may be fine.
	StoreErr bool
}

// Refused is the Result for a message whose id could not be read.
func Refused(err error) Result { return Result{Action: Refuse, Err: err} }

// Run runs fn once for (consumer, id) through Once, and says what the
// adapter must tell the broker: delivery counts this message's deliveries
// from 1, and p bounds and spaces them.
func Run(ctx context.Context, store idemrt.MessageStore, consumer, id string, delivery int, p Policy, fn func(context.Context) error) Result {
	ran, handlerFailed, err := Once(ctx, store, consumer, id, fn)
	switch {
	case err == nil:
		return Result{Action: Ack, Ran: ran}
	case !handlerFailed:
		// The store failed: BeginTx, MarkProcessed, or the commit after a
		// successful handler.
		return Result{Action: Retry, Delay: p.Delay(delivery), Err: err, StoreErr: true}
	case delivery >= p.max():
		return Result{Action: DeadLetter, Err: err}
	}
	return Result{Action: Retry, Delay: p.Delay(delivery), Err: err}
}

// Once runs fn for (consumer, id) through idemrt.ProcessOnce: in one
// transaction with MarkProcessed, committed before Once returns nil. ran is
// false for a duplicate. handlerFailed tells a failure of fn (its error, or
// a panic, recovered and returned as an error; the transaction rolls back)
// from a failure of the store.
func Once(ctx context.Context, store idemrt.MessageStore, consumer, id string, fn func(context.Context) error) (ran, handlerFailed bool, err error) {
	ran, err = idemrt.ProcessOnce(ctx, store, consumer, id, func(ctx context.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("handler panicked: %v\n%s", v, debug.Stack())
			}
			handlerFailed = err != nil
		}()
		return fn(ctx)
	})
	return ran, handlerFailed, err
}

// Event describes one delivery to Hooks.
type Event struct {
	Consumer string
	// MessageID is empty for a refused message.
	MessageID string
	// Subject is the NATS subject, the AMQP routing key or the Watermill
	// topic (when the adapter knows it).
	Subject  string
	Delivery int
	// Delay before the redelivery (Retried).
	Delay time.Duration
	// Err: why the delivery failed or was refused.
	Err error
}

// Hooks observe deliveries. Every field is optional; hooks run on the
// consuming goroutine, so they must be quick.
type Hooks struct {
	// Processed: the handler ran and its transaction committed.
	Processed func(context.Context, Event)
	// Duplicate: the id was processed before; acked without running.
	Duplicate func(context.Context, Event)
	// Retried: the handler or the store failed; the message comes back
	// after Event.Delay.
	Retried func(context.Context, Event)
	// DeadLettered: the handler failed on the last allowed delivery.
	DeadLettered func(context.Context, Event)
	// Refused: the message had no usable id and was not processed.
	Refused func(context.Context, Event)
}

// Report calls the hook for r and logs what needs an operator: refusals
// and dead letters at error level, retries at warn level.
func Report(ctx context.Context, log *slog.Logger, h Hooks, r Result, ev Event) {
	if log == nil {
		log = slog.Default()
	}
	ev.Err = r.Err
	ev.Delay = r.Delay
	attrs := []any{"consumer", ev.Consumer, "message_id", ev.MessageID, "subject", ev.Subject, "delivery", ev.Delivery}
	switch r.Action {
	case Ack:
		if r.Ran {
			call(ctx, h.Processed, ev)
		} else {
			call(ctx, h.Duplicate, ev)
		}
	case Retry:
		log.WarnContext(ctx, "message handling failed; redelivering later", append(attrs, "delay", r.Delay, "store_error", r.StoreErr, "err", r.Err)...)
		call(ctx, h.Retried, ev)
	case DeadLetter:
		log.ErrorContext(ctx, "message handling failed on its last allowed delivery; dead-lettered", append(attrs, "err", r.Err)...)
		call(ctx, h.DeadLettered, ev)
	case Refuse:
		log.ErrorContext(ctx, "message refused: no usable message id, so it cannot be deduplicated; not processed", append(attrs, "err", r.Err)...)
		call(ctx, h.Refused, ev)
	}
}

func call(ctx context.Context, f func(context.Context, Event), ev Event) {
	if f != nil {
		f(ctx, ev)
	}
}

// CheckConsumer reports a consumer name the stores cannot keep.
func CheckConsumer(consumer string) error {
	if consumer == "" || len(consumer) > MaxID {
		return fmt.Errorf("consumer name must be 1 to %d bytes, got %d", MaxID, len(consumer))
	}
	return nil
}
