// Package natsidem runs NATS JetStream consumers exactly once against a
// durable idemrt.MessageStore, and publishes outbox events to JetStream.
//
// A Processor wraps a handler: each delivery's id (Nats-Msg-Id by default)
// is marked processed in the same transaction as the handler's writes
// (idemrt.ProcessOnce), and the message is acked only after the commit.
// A redelivery of a processed id is acked without running the handler. A
// handler error naks the message with a delay (NakWithDelay, growing with
// the delivery count) and, on the last allowed delivery, dead-letters it:
// published to Config.DeadLetterSubject (when set) and terminated. A
// message without an id is refused the same way, never processed without
// deduplication.
//
// The Publisher sets Nats-Msg-Id to the event's id and waits for the
// stream's PubAck, so that the stream's duplicate window drops the
// re-publish of an outbox relay that crashed before marking the event sent.
//
// See docs/messaging.md for the guarantees and configuration.
package natsidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// IDSource says where a message's id comes from.
type IDSource = delivery.Source

// MsgID reads the Nats-Msg-Id header (jetstream.MsgIDHeader), the id
// JetStream's own publish deduplication uses. It is the default.
func MsgID() IDSource { return delivery.Broker() }

// HeaderID reads the id from the named header.
func HeaderID(name string) IDSource { return delivery.Header(name) }

// BodyID reads the id from the JSON body at the JSON Pointer (e.g. "/id").
func BodyID(pointer string) IDSource { return delivery.BodyField(pointer) }

// ContentHash uses the SHA-256 of the body as the id: messages with the same
// body count as one. Only for messages where that is true.
func ContentHash() IDSource { return delivery.ContentHash() }

// Hooks observe deliveries; Event describes one.
type (
	Hooks = delivery.Hooks
	Event = delivery.Event
)

// Action is what Handle told the server.
type Action = delivery.Action

// The actions.
const (
	Ack        = delivery.Ack        // committed, or a duplicate: Ack
	Retry      = delivery.Retry      // failed: NakWithDelay
	DeadLetter = delivery.DeadLetter // failed on the last delivery: dead letter, Term
	Refuse     = delivery.Refuse     // no usable id: dead letter, Term, never processed
)

// Dead-letter headers: a message published to Config.DeadLetterSubject
// keeps the original's headers and body and adds these.
const (
	HeaderDeadReason   = "Idemgen-Dead-Reason"   // "refused" or "failed"
	HeaderDeadError    = "Idemgen-Dead-Error"    // the handler's error, or why it was refused
	HeaderDeadSubject  = "Idemgen-Dead-Subject"  // the original subject
	HeaderDeadStream   = "Idemgen-Dead-Stream"   // the stream it was stored on
	HeaderDeadSequence = "Idemgen-Dead-Sequence" // its stream sequence
	HeaderDeadDelivery = "Idemgen-Dead-Delivery" // the delivery that gave up
)

// Config configures a Processor.
type Config struct {
	// Store records processed ids; with a SQL store, in the transaction of
	// the handler's writes. Required.
	Store idemrt.MessageStore
	// Consumer names the consumer in the store (1 to 255 bytes): ids are
	// deduplicated per consumer name. Required.
	Consumer string
	// ID says where a message's id comes from; the zero value is MsgID().
	ID IDSource
	// MaxDeliveries bounds the deliveries of a message whose handler keeps
	// failing: the failure of delivery MaxDeliveries dead-letters it.
	// 0 means 5. The JetStream consumer's own MaxDeliver must be -1
	// (unlimited) or at least this, or the server stops redelivering first
	// (Consume checks).
	MaxDeliveries int
	// Backoff is the NakWithDelay delay after failed delivery n; nil doubles
	// from 1s to at most 1m.
	Backoff func(delivery int) time.Duration
	// DeadLetterSubject, when set, receives each dead-lettered or refused
	// message (published through DeadLetterPublisher, waiting for its
	// PubAck, with the Header* headers) before the original is terminated.
	// Empty: the message is only terminated, logged and reported to Hooks.
	DeadLetterSubject string
	// DeadLetterPublisher publishes to DeadLetterSubject (a JetStream
	// context); required when DeadLetterSubject is set.
	DeadLetterPublisher jetstream.Publisher
	Hooks               Hooks
	// Logger receives refusals and dead letters (error level) and retries
	// (warn level); nil means slog.Default().
	Logger *slog.Logger
}

// Handler handles one message. ctx carries the store's transaction
// (idemrt.TxFromContext, or the generated package's TxFromContext): the
// handler's writes go through it, so that they commit with the processed
// id. A returned error rolls the transaction back and the message comes
// back later.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Processor runs a Handler exactly once per message id.
type Processor struct {
	cfg    Config
	policy delivery.Policy
	h      Handler
	// afterCommit, when set (by tests), runs between the handler's commit
	// and the acknowledgement.
	afterCommit func(delivery.Result)
}

// New checks cfg and returns a Processor for h.
func New(cfg Config, h Handler) (*Processor, error) {
	if cfg.Store == nil {
		return nil, errors.New("natsidem: Config.Store is nil")
	}
	if h == nil {
		return nil, errors.New("natsidem: the handler is nil")
	}
	if err := delivery.CheckConsumer(cfg.Consumer); err != nil {
		return nil, fmt.Errorf("natsidem: Config.Consumer: %w", err)
	}
	if err := cfg.ID.Validate(); err != nil {
		return nil, fmt.Errorf("natsidem: Config.ID: %w", err)
	}
	p := delivery.Policy{MaxDeliveries: cfg.MaxDeliveries, Backoff: cfg.Backoff}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("natsidem: Config.%w", err)
	}
	if cfg.DeadLetterSubject != "" && cfg.DeadLetterPublisher == nil {
		return nil, errors.New("natsidem: Config.DeadLetterSubject is set but DeadLetterPublisher is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Processor{cfg: cfg, policy: p, h: h}, nil
}

// MaxDeliveries is the configured bound on deliveries (the default filled in).
func (p *Processor) MaxDeliveries() int {
	if p.cfg.MaxDeliveries == 0 {
		return delivery.DefaultMaxDeliveries
	}
	return p.cfg.MaxDeliveries
}

// Handle processes one delivery and acknowledges it: Ack after the
// handler's commit or for a duplicate, NakWithDelay after a failure, Term
// after a dead letter or a refusal. It returns what it did.
func (p *Processor) Handle(ctx context.Context, msg jetstream.Msg) Action {
	ev := delivery.Event{Consumer: p.cfg.Consumer, Subject: msg.Subject(), Delivery: 1}
	md, mdErr := msg.Metadata()
	if mdErr == nil {
		ev.Delivery = int(md.NumDelivered)
	}
	id, err := p.cfg.ID.ID(delivery.Message{
		BrokerID: msg.Headers().Get(jetstream.MsgIDHeader),
		Header:   msg.Headers().Get,
		Body:     msg.Data(),
	})
	var r delivery.Result
	switch {
	case mdErr != nil:
		// Not a JetStream message (no ack reply): it cannot be acked or
		// redelivered, so it is not processed either.
		r = delivery.Refused(fmt.Errorf("not a JetStream delivery: %w", mdErr))
	case err != nil:
		r = delivery.Refused(err)
	default:
		ev.MessageID = id
		r = delivery.Run(ctx, p.cfg.Store, p.cfg.Consumer, id, ev.Delivery, p.policy, func(ctx context.Context) error {
			return p.h(ctx, msg)
		})
		if p.afterCommit != nil {
			p.afterCommit(r)
		}
	}
	r = p.settle(ctx, msg, md, ev, r)
	delivery.Report(ctx, p.cfg.Logger, p.cfg.Hooks, r, ev)
	return r.Action
}

// settle tells the server the outcome. A dead letter that cannot be
// published turns into a retry.
func (p *Processor) settle(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, ev delivery.Event, r delivery.Result) delivery.Result {
	var err error
	switch r.Action {
	case delivery.Ack:
		err = msg.Ack()
	case delivery.Retry:
		err = msg.NakWithDelay(r.Delay)
	case delivery.DeadLetter, delivery.Refuse:
		if perr := p.deadLetter(ctx, msg, md, ev, r); perr != nil {
			r = delivery.Result{Action: delivery.Retry, Delay: p.policy.Delay(ev.Delivery), StoreErr: true,
				Err: fmt.Errorf("dead letter not published: %w (after: %v)", perr, r.Err)}
			err = msg.NakWithDelay(r.Delay)
			break
		}
		err = msg.Term()
	}
	if err != nil {
		// The server redelivers after AckWait; a processed id is then acked
		// as a duplicate.
		p.cfg.Logger.WarnContext(ctx, "natsidem: acknowledgement failed; the message will be redelivered",
			"consumer", ev.Consumer, "message_id", ev.MessageID, "action", r.Action.String(), "err", err)
	}
	return r
}

func (p *Processor) deadLetter(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, ev delivery.Event, r delivery.Result) error {
	if p.cfg.DeadLetterSubject == "" {
		return nil
	}
	dl := nats.NewMsg(p.cfg.DeadLetterSubject)
	dl.Data = msg.Data()
	for k, vs := range msg.Headers() {
		dl.Header[k] = append([]string(nil), vs...)
	}
	reason := "failed"
	if r.Action == delivery.Refuse {
		reason = "refused"
	}
	dl.Header.Set(HeaderDeadReason, reason)
	if r.Err != nil {
		dl.Header.Set(HeaderDeadError, r.Err.Error())
	}
	dl.Header.Set(HeaderDeadSubject, msg.Subject())
	dl.Header.Set(HeaderDeadDelivery, strconv.Itoa(ev.Delivery))
	opts := []jetstream.PublishOpt(nil)
	if md != nil {
		dl.Header.Set(HeaderDeadStream, md.Stream)
		dl.Header.Set(HeaderDeadSequence, strconv.FormatUint(md.Sequence.Stream, 10))
		// Stable per stored message, and never the original's id, which a
		// dead-letter subject on the same stream would drop as a duplicate.
		opts = append(opts, jetstream.WithMsgID("dead-letter:"+md.Stream+":"+strconv.FormatUint(md.Sequence.Stream, 10)))
	} else {
		dl.Header.Del(jetstream.MsgIDHeader)
	}
	_, err := p.cfg.DeadLetterPublisher.PublishMsg(ctx, dl, opts...)
	return err
}

// MessageHandler returns a jetstream.MessageHandler that runs Handle with
// ctx, for Consumer.Consume.
func (p *Processor) MessageHandler(ctx context.Context) jetstream.MessageHandler {
	return func(msg jetstream.Msg) { p.Handle(ctx, msg) }
}

// Consume checks c's configuration (explicit acks; MaxDeliver unlimited or
// at least MaxDeliveries) and that a stream stores DeadLetterSubject,
// consumes c with Handle until ctx ends, then stops the subscription and
// waits for the handler in progress. It returns ctx's error, or an error
// from checking or starting the consumer.
func (p *Processor) Consume(ctx context.Context, c jetstream.Consumer, opts ...jetstream.PullConsumeOpt) error {
	if err := p.CheckConsumer(c.CachedInfo()); err != nil {
		return err
	}
	if err := p.checkDeadLetter(ctx); err != nil {
		return err
	}
	cc, err := c.Consume(p.MessageHandler(ctx), opts...)
	if err != nil {
		return fmt.Errorf("natsidem: consume: %w", err)
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return ctx.Err()
}

// checkDeadLetter reports a DeadLetterSubject that no stream stores (when
// DeadLetterPublisher is a JetStream context that can tell): no dead
// letter could be published, so a failing message would be retried for
// ever instead.
func (p *Processor) checkDeadLetter(ctx context.Context) error {
	sm, ok := p.cfg.DeadLetterPublisher.(jetstream.StreamManager)
	if p.cfg.DeadLetterSubject == "" || !ok {
		return nil
	}
	if _, err := sm.StreamNameBySubject(ctx, p.cfg.DeadLetterSubject); err != nil {
		return fmt.Errorf("natsidem: Config.DeadLetterSubject %s: no stream stores it (%w): a message that keeps failing could never be dead-lettered and would be retried for ever",
			p.cfg.DeadLetterSubject, err)
	}
	return nil
}

// CheckConsumer reports a consumer configuration under which the
// Processor cannot keep its promises: acks that are not explicit, or a
// MaxDeliver that stops redeliveries before MaxDeliveries.
func (p *Processor) CheckConsumer(info *jetstream.ConsumerInfo) error {
	if info == nil {
		return nil
	}
	if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return fmt.Errorf("natsidem: consumer %s acks with %v; it needs AckExplicitPolicy (ack after commit)", info.Name, info.Config.AckPolicy)
	}
	if m := info.Config.MaxDeliver; m > 0 && m < p.MaxDeliveries() {
		return fmt.Errorf("natsidem: consumer %s has MaxDeliver %d, below MaxDeliveries %d: the server would stop redelivering before the message is dead-lettered", info.Name, m, p.MaxDeliveries())
	}
	return nil
}
