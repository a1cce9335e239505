// Package amqpidem runs RabbitMQ (AMQP 0-9-1) consumers exactly once
// against a durable idemrt.MessageStore, and publishes outbox events with
// publisher confirms.
//
// A Processor consumes a queue with manual acks. Each delivery's id (the
// message-id property by default) is marked processed in the same
// transaction as the handler's writes (idemrt.ProcessOnce), and the
// delivery is acked only after the commit. A redelivery of a processed id
// is acked without running the handler.
//
// Retries wait in delay queues: a failed message is republished (with
// publisher confirms) to <queue>.retry.<delay>, a durable queue whose
// x-message-ttl is the delay and whose dead-letter exchange routes the
// expired message back to <queue>; then the delivery is acked. Each copy
// carries its delivery number in the Idemgen-Delivery header. The failure
// of delivery MaxDeliveries (default 5) publishes the message to
// <queue>.dead instead; so does a message without an id, which is never
// processed. DeclareTopology declares these queues.
//
// See docs/messaging.md for the guarantees and configuration.
package amqpidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// IDSource says where a message's id comes from.
type IDSource = delivery.Source

// MessageID reads the AMQP message-id property. It is the default.
func MessageID() IDSource { return delivery.Broker() }

// HeaderID reads the id from the named entry of the headers table (a
// string value).
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

// Action is what the Processor did with a delivery.
type Action = delivery.Action

// The actions.
const (
	Ack        = delivery.Ack        // committed, or a duplicate: ack
	Retry      = delivery.Retry      // failed: to a retry queue, then ack
	DeadLetter = delivery.DeadLetter // failed on the last delivery: to the dead-letter queue, then ack
	Refuse     = delivery.Refuse     // no usable id: to the dead-letter queue, then ack; never processed
)

// Headers the Processor sets on the copies it republishes.
const (
	HeaderDelivery   = "Idemgen-Delivery"    // the delivery number the copy will have (2, 3, ...)
	HeaderRoutingKey = "Idemgen-Routing-Key" // the routing key of the first delivery
	HeaderDeadReason = "Idemgen-Dead-Reason" // dead letters: "refused" or "failed"
	HeaderDeadError  = "Idemgen-Dead-Error"  // dead letters: the handler's error, or why it was refused
)

// DefaultRetryDelays are the delays of the retry queues when
// Config.RetryDelays is empty.
var DefaultRetryDelays = []time.Duration{time.Second, 10 * time.Second, time.Minute}

// Config configures a Processor.
type Config struct {
	// Store records processed ids; with a SQL store, in the transaction of
	// the handler's writes. Required.
	Store idemrt.MessageStore
	// Consumer names the consumer in the store (1 to 255 bytes): ids are
	// deduplicated per consumer name. Required.
	Consumer string
	// Queue is the queue to consume (declared by the application, durable).
	// Required.
	Queue string
	// ID says where a message's id comes from; the zero value is MessageID().
	ID IDSource
	// MaxDeliveries bounds the deliveries of a message whose handler keeps
	// failing: the failure of delivery MaxDeliveries dead-letters it.
	// 0 means 5.
	MaxDeliveries int
	// RetryDelays: after failed delivery n the message waits
	// RetryDelays[min(n, len)-1] in the queue <Queue>.retry.<delay>, one
	// queue per distinct delay (a queue-wide TTL expires messages in order,
	// where per-message TTLs would wait behind longer ones). Empty means
	// DefaultRetryDelays.
	RetryDelays []time.Duration
	// DeadLetterQueue receives dead-lettered and refused messages through
	// the default exchange; empty means <Queue>.dead.
	DeadLetterQueue string
	// Prefetch is the channel's QoS prefetch count; 0 means 16. Deliveries
	// are handled one at a time, in order.
	Prefetch int
	Hooks    Hooks
	// Logger receives refusals and dead letters (error level) and retries
	// (warn level); nil means slog.Default().
	Logger *slog.Logger
}

// Handler handles one delivery. ctx carries the store's transaction
// (idemrt.TxFromContext, or the generated package's TxFromContext): the
// handler's writes go through it, so that they commit with the processed
// id. A returned error rolls the transaction back and the message comes
// back later. The handler must not ack or nack d.
type Handler func(ctx context.Context, d amqp.Delivery) error

// Processor consumes a queue and runs a Handler exactly once per message id.
type Processor struct {
	cfg    Config
	policy delivery.Policy
	h      Handler
	// afterCommit, when set (by tests), runs between the commit and the ack.
	afterCommit func(delivery.Result)
}

// New checks cfg and returns a Processor for h.
func New(cfg Config, h Handler) (*Processor, error) {
	if cfg.Store == nil {
		return nil, errors.New("amqpidem: Config.Store is nil")
	}
	if h == nil {
		return nil, errors.New("amqpidem: the handler is nil")
	}
	if err := delivery.CheckConsumer(cfg.Consumer); err != nil {
		return nil, fmt.Errorf("amqpidem: Config.Consumer: %w", err)
	}
	if cfg.Queue == "" {
		return nil, errors.New("amqpidem: Config.Queue is empty")
	}
	if err := cfg.ID.Validate(); err != nil {
		return nil, fmt.Errorf("amqpidem: Config.ID: %w", err)
	}
	if cfg.Prefetch < 0 {
		return nil, fmt.Errorf("amqpidem: Config.Prefetch is %d", cfg.Prefetch)
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 16
	}
	if len(cfg.RetryDelays) == 0 {
		cfg.RetryDelays = DefaultRetryDelays
	}
	for _, d := range cfg.RetryDelays {
		if d < time.Millisecond {
			return nil, fmt.Errorf("amqpidem: Config.RetryDelays: %v is below 1ms (queue TTLs are whole milliseconds)", d)
		}
	}
	cfg.RetryDelays = append([]time.Duration(nil), cfg.RetryDelays...)
	if cfg.DeadLetterQueue == "" {
		cfg.DeadLetterQueue = cfg.Queue + ".dead"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Processor{cfg: cfg, h: h}
	p.policy = delivery.Policy{MaxDeliveries: cfg.MaxDeliveries, Backoff: p.retryDelay}
	if err := p.policy.Check(); err != nil {
		return nil, fmt.Errorf("amqpidem: Config.%w", err)
	}
	return p, nil
}

func (p *Processor) retryDelay(delivery int) time.Duration {
	return p.cfg.RetryDelays[min(max(delivery, 1), len(p.cfg.RetryDelays))-1]
}

// RetryQueue is the name of the retry queue holding messages for delay.
func (p *Processor) RetryQueue(delay time.Duration) string {
	return p.cfg.Queue + ".retry." + delay.String()
}

// DeadLetterQueue is the name of the dead-letter queue.
func (p *Processor) DeadLetterQueue() string { return p.cfg.DeadLetterQueue }

// DeclareTopology declares (durable, idempotently) the retry queues, each
// with its TTL and a dead-letter route back to Config.Queue through the
// default exchange, and the dead-letter queue. The consumed queue itself
// is the application's.
func (p *Processor) DeclareTopology(ch *amqp.Channel) error {
	seen := map[time.Duration]bool{}
	for _, d := range p.cfg.RetryDelays {
		if seen[d] {
			continue
		}
		seen[d] = true
		_, err := ch.QueueDeclare(p.RetryQueue(d), true, false, false, false, amqp.Table{
			"x-message-ttl":             d.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": p.cfg.Queue,
		})
		if err != nil {
			return fmt.Errorf("amqpidem: declare %s: %w", p.RetryQueue(d), err)
		}
	}
	if _, err := ch.QueueDeclare(p.cfg.DeadLetterQueue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("amqpidem: declare %s: %w", p.cfg.DeadLetterQueue, err)
	}
	return nil
}

// Consume consumes Config.Queue on conn until ctx ends (it returns
// ctx.Err()) or the channel or connection closes (it returns an error; the
// caller reconnects and calls Consume again). Each delivery is acked only
// after its transaction commits; deliveries not acked when the channel
// closes are redelivered by the broker, and the ones already processed are
// then acked as duplicates.
func (p *Processor) Consume(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqpidem: open channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(p.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("amqpidem: qos: %w", err)
	}
	pub := &confirmer{conn: conn}
	defer pub.close()
	// Consume, not ConsumeWithContext: the context variant cancels the
	// consumer from another goroutine, which can leave the Close below
	// waiting for a close-ok forever. Closing the channel ends the consumer
	// and requeues what was delivered and not acked.
	deliveries, err := ch.Consume(p.cfg.Queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqpidem: consume %s: %w", p.cfg.Queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	// gone closes when the channel does, for settle's wait.
	gone := make(chan struct{})
	goneErr := ch.NotifyClose(make(chan *amqp.Error, 1))
	go func() { <-goneErr; close(gone) }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				if err := <-closed; err != nil {
					return fmt.Errorf("amqpidem: channel closed: %w", err)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return errors.New("amqpidem: the channel closed")
			}
			p.handle(ctx, pub, gone, d)
		}
	}
}

// handle processes one delivery and settles it.
func (p *Processor) handle(ctx context.Context, pub *confirmer, gone <-chan struct{}, d amqp.Delivery) Action {
	n := deliveryNumber(d)
	ev := delivery.Event{Consumer: p.cfg.Consumer, Subject: d.RoutingKey, Delivery: n}
	if rk, ok := d.Headers[HeaderRoutingKey].(string); ok {
		ev.Subject = rk
	}
	id, err := p.cfg.ID.ID(delivery.Message{
		BrokerID: d.MessageId,
		Header: func(name string) string {
			s, _ := d.Headers[name].(string)
			return s
		},
		Body: d.Body,
	})
	var r delivery.Result
	if err != nil {
		r = delivery.Refused(err)
	} else {
		ev.MessageID = id
		r = delivery.Run(ctx, p.cfg.Store, p.cfg.Consumer, id, n, p.policy, func(ctx context.Context) error {
			return p.h(ctx, d)
		})
		if p.afterCommit != nil {
			p.afterCommit(r)
		}
	}
	r = p.settle(ctx, pub, gone, d, ev, r)
	delivery.Report(ctx, p.cfg.Logger, p.cfg.Hooks, r, ev)
	return r.Action
}

// maxRequeueWait bounds the wait before a delivery whose retry copy or
// dead letter could not be published is requeued.
const maxRequeueWait = 10 * time.Second

// settle acks d once what the result asks for is durable: a retry copy or a
// dead letter is published (and confirmed) first. When that publish fails,
// d is rejected with requeue, after the retry delay (at most
// maxRequeueWait; at once when the channel has closed, which requeues it
// anyway), so that the broker hands it out again (as a redelivery, with the
// same delivery number).
func (p *Processor) settle(ctx context.Context, pub *confirmer, gone <-chan struct{}, d amqp.Delivery, ev delivery.Event, r delivery.Result) delivery.Result {
	var perr error
	switch r.Action {
	case delivery.Retry:
		perr = pub.publish(ctx, "", p.RetryQueue(r.Delay), p.copyOf(d, ev, func(h amqp.Table) {
			h[HeaderDelivery] = int64(ev.Delivery + 1)
		}))
	case delivery.DeadLetter, delivery.Refuse:
		reason := "failed"
		if r.Action == delivery.Refuse {
			reason = "refused"
		}
		perr = pub.publish(ctx, "", p.cfg.DeadLetterQueue, p.copyOf(d, ev, func(h amqp.Table) {
			h[HeaderDeadReason] = reason
			if r.Err != nil {
				h[HeaderDeadError] = r.Err.Error()
			}
		}))
	}
	if perr != nil {
		r = delivery.Result{Action: delivery.Retry, Delay: p.policy.Delay(ev.Delivery), StoreErr: true,
			Err: fmt.Errorf("republish failed: %w (after: %v)", perr, r.Err)}
		t := time.NewTimer(min(r.Delay, maxRequeueWait))
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-gone:
		}
		t.Stop()
		if err := d.Nack(false, true); err != nil {
			p.ackFailed(ctx, ev, r, err)
		}
		return r
	}
	if err := d.Ack(false); err != nil {
		p.ackFailed(ctx, ev, r, err)
	}
	return r
}

func (p *Processor) ackFailed(ctx context.Context, ev delivery.Event, r delivery.Result, err error) {
	// The broker redelivers unacked messages when the channel closes; a
	// processed id is then acked as a duplicate.
	p.cfg.Logger.WarnContext(ctx, "amqpidem: acknowledgement failed; the message will be redelivered",
		"consumer", ev.Consumer, "message_id", ev.MessageID, "action", r.Action.String(), "err", err)
}

// copyOf is d as a new persistent publishing, with its headers copied and
// edited by set.
func (p *Processor) copyOf(d amqp.Delivery, ev delivery.Event, set func(amqp.Table)) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range d.Headers {
		h[k] = v
	}
	delete(h, "x-delivery-count") // the broker's count of the original's redeliveries
	h[HeaderRoutingKey] = ev.Subject
	set(h)
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

// deliveryNumber is d's delivery number: the Idemgen-Delivery header of a
// retry copy (1 for an original), plus the redeliveries a quorum queue
// counts in x-delivery-count (crashes and requeues), so that the first
// handler error after them is judged against MaxDeliveries. (A message
// that crashes the process every time never gets that far: the quorum
// queue's x-delivery-limit bounds it.)
func deliveryNumber(d amqp.Delivery) int {
	n := 1
	if v, ok := intHeader(d.Headers[HeaderDelivery]); ok && v > 1 {
		n = v
	}
	if v, ok := intHeader(d.Headers["x-delivery-count"]); ok && v > 0 {
		n += v
	}
	return n
}

func intHeader(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int8:
		return int(x), true
	case int16:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case uint8:
		return int(x), true
	case uint16:
		return int(x), true
	case uint32:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}
