package amqpidem

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// HeaderEventKey carries OutboxEvent.Key (the aggregate key) when it is set.
const HeaderEventKey = "Idemgen-Event-Key"

// Publisher publishes outbox events to an exchange with publisher confirms:
// it implements idemrt.Publisher for the outbox relay. It publishes one
// event at a time (a confirm, then the next), so that a refused or
// unroutable event is reported for that event.
type Publisher struct {
	exchange string
	c        confirmer
}

var _ idemrt.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to exchange ("" is the default
// exchange, which routes to the queue named by the routing key). dial
// opens a connection; the Publisher dials again when its connection has
// closed, on the next Publish.
func NewPublisher(dial func() (*amqp.Connection, error), exchange string) (*Publisher, error) {
	if dial == nil {
		return nil, errors.New("amqpidem: NewPublisher: dial is nil")
	}
	return &Publisher{exchange: exchange, c: confirmer{dial: dial}}, nil
}

// NewPublisherOn returns a Publisher on the open connection conn, which it
// never redials: once conn closes, Publish fails.
func NewPublisherOn(conn *amqp.Connection, exchange string) *Publisher {
	return &Publisher{exchange: exchange, c: confirmer{conn: conn}}
}

// Publish publishes ev to the exchange with routing key ev.Topic, message-id
// ev.ID, persistent delivery, ev.CreatedAt as the timestamp and ev.Headers
// (and ev.Key in HeaderEventKey) as headers; mandatory, so that an event
// no queue is bound for is an error rather than dropped. It returns nil
// once the broker has confirmed the message (for a durable queue, once it
// is written to disk). RabbitMQ does not drop re-publishes: an event
// published again after a relay crash reaches the consumer twice, and the
// consumer's deduplication on ev.ID (a Processor) drops the second.
func (p *Publisher) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	if ev.ID == "" {
		return errors.New("amqpidem: publish: the event has no ID")
	}
	h := amqp.Table{}
	for k, v := range ev.Headers {
		h[k] = v
	}
	if ev.Key != "" {
		h[HeaderEventKey] = ev.Key
	}
	msg := amqp.Publishing{
		Headers:      h,
		DeliveryMode: amqp.Persistent,
		MessageId:    ev.ID,
		Timestamp:    ev.CreatedAt,
		Body:         ev.Payload,
	}
	if err := p.c.publish(ctx, p.exchange, ev.Topic, msg); err != nil {
		return fmt.Errorf("amqpidem: publish %s to exchange %q, routing key %q: %w", ev.ID, p.exchange, ev.Topic, err)
	}
	return nil
}

// Close closes the Publisher's channel, and its connection if it dialed it.
func (p *Publisher) Close() error { return p.c.close() }
