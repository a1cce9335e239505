// Package watermillidem is a Watermill handler middleware that runs each
// message's handler once per message id, recorded in a durable
// idemrt.MessageStore in the same transaction as the handler's writes. It
// works with every Watermill pub/sub (AMQP, Kafka, SQS, Google Pub/Sub,
// SQL, GoChannel), whose own deduplication is in memory or absent.
//
// The middleware runs the handler through idemrt.ProcessOnce with the
// transaction in the message's context (msg.Context(); idemrt.TxFromContext
// or the generated package's TxFromContext finds it). It returns only after
// the commit, so the router acks only after the commit. A redelivery of a
// processed id returns no error and no messages without running the
// handler, and the router acks it. A handler error (or panic) rolls back
// and is returned: the router nacks, and Watermill's Retry and PoisonQueue
// middlewares (see Stack) bound and space the redeliveries. A message with
// no usable id is refused with an error wrapping ErrRefused, never handled.
//
// See docs/messaging.md for the guarantees and configuration.
package watermillidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// IDSource says where a message's id comes from.
type IDSource = delivery.Source

// UUID reads the message's Watermill UUID (Message.UUID). It is the default.
// Watermill's pub/subs carry the UUID across the broker (watermill-amqp in
// a header, for example); a message made by another library may have none
// or a fresh one per delivery, so declare a source for those.
func UUID() IDSource { return delivery.Broker() }

// MetadataID reads the id from the message's metadata key.
func MetadataID(key string) IDSource { return delivery.Header(key) }

// BodyID reads the id from the JSON payload at the JSON Pointer (e.g. "/id").
func BodyID(pointer string) IDSource { return delivery.BodyField(pointer) }

// ContentHash uses the SHA-256 of the payload as the id: messages with the
// same payload count as one. Only for messages where that is true.
func ContentHash() IDSource { return delivery.ContentHash() }

// Hooks observe deliveries; Event describes one. Retried is called for
// each returned error; DeadLettered is not called (the PoisonQueue
// middleware dead-letters).
type (
	Hooks = delivery.Hooks
	Event = delivery.Event
)

// ErrRefused is wrapped by the error returned for a message with no usable
// id: it was not handled. Do not retry it (Stack's Retry does not); send it
// to a poison queue.
var ErrRefused = errors.New("watermillidem: message refused: no usable message id, so it cannot be deduplicated")

// ErrStore is wrapped by the error returned when the store failed (the
// database down, a failed commit), not the handler: the message itself
// may be fine. Stack's poison queue lets it through to the router, which
// nacks it, so that the broker delivers it again, never poisons it.
var ErrStore = errors.New("watermillidem: the message store failed")

// Config configures the middleware.
type Config struct {
	// Store records processed ids; with a SQL store, in the transaction of
	// the handler's writes. Required.
	Store idemrt.MessageStore
	// Consumer names the consumer in the store (1 to 255 bytes): ids are
	// deduplicated per consumer name. Give each router handler its own.
	// Required.
	Consumer string
	// ID says where a message's id comes from; the zero value is UUID().
	ID    IDSource
	Hooks Hooks
	// Logger receives refusals (error level) and failures (warn level);
	// nil means slog.Default().
	Logger *slog.Logger
}

// Middleware returns the deduplicating middleware. Add it innermost (last),
// so that every retry of Watermill's Retry middleware runs a new
// transaction.
func Middleware(cfg Config) (message.HandlerMiddleware, error) {
	if cfg.Store == nil {
		return nil, errors.New("watermillidem: Config.Store is nil")
	}
	if err := delivery.CheckConsumer(cfg.Consumer); err != nil {
		return nil, fmt.Errorf("watermillidem: Config.Consumer: %w", err)
	}
	if err := cfg.ID.Validate(); err != nil {
		return nil, fmt.Errorf("watermillidem: Config.ID: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			return handle(cfg, h, msg)
		}
	}, nil
}

func handle(cfg Config, h message.HandlerFunc, msg *message.Message) ([]*message.Message, error) {
	orig := msg.Context()
	ev := delivery.Event{Consumer: cfg.Consumer, Subject: message.SubscribeTopicFromCtx(orig), Delivery: 1}
	id, err := cfg.ID.ID(delivery.Message{BrokerID: msg.UUID, Header: msg.Metadata.Get, Body: msg.Payload})
	if err != nil {
		delivery.Report(orig, cfg.Logger, cfg.Hooks, delivery.Refused(err), ev)
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	ev.MessageID = id
	var produced []*message.Message
	ran, handlerFailed, err := delivery.Once(orig, cfg.Store, cfg.Consumer, id, func(ctx context.Context) error {
		msg.SetContext(ctx)
		defer msg.SetContext(orig)
		var herr error
		produced, herr = h(msg)
		return herr
	})
	if err != nil {
		delivery.Report(orig, cfg.Logger, cfg.Hooks, delivery.Result{Action: delivery.Retry, Err: err, StoreErr: !handlerFailed}, ev)
		if !handlerFailed {
			return nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		return nil, err
	}
	delivery.Report(orig, cfg.Logger, cfg.Hooks, delivery.Result{Action: delivery.Ack, Ran: ran}, ev)
	if !ran {
		return nil, nil
	}
	return produced, nil
}

// Stack returns the middlewares for a router handler, outermost first:
// a poison queue (every handler error that survives the retries, and every
// refused message, is published to poisonTopic on pub and then acked; a
// store error, ErrStore, goes back to the router, which nacks), retry
// (which never retries a refused message; a ShouldRetry of its own is
// kept), and the deduplicating middleware. Add them with
// router.AddMiddleware(stack...) or handler.AddMiddleware(stack...).
func Stack(cfg Config, pub message.Publisher, poisonTopic string, retry middleware.Retry) ([]message.HandlerMiddleware, error) {
	idem, err := Middleware(cfg)
	if err != nil {
		return nil, err
	}
	poison, err := middleware.PoisonQueueWithFilter(pub, poisonTopic, func(err error) bool { return !errors.Is(err, ErrStore) })
	if err != nil {
		return nil, fmt.Errorf("watermillidem: poison queue: %w", err)
	}
	should := retry.ShouldRetry
	retry.ShouldRetry = func(p middleware.RetryParams) bool {
		if errors.Is(p.Err, ErrRefused) {
			return false
		}
		return should == nil || should(p)
	}
	return []message.HandlerMiddleware{poison, retry.Middleware, idem}, nil
}
