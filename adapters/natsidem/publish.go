package natsidem

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// HeaderEventKey carries OutboxEvent.Key (the aggregate key) when it is set.
const HeaderEventKey = "Idemgen-Event-Key"

// Publisher publishes outbox events to JetStream: it implements
// idemrt.Publisher for the outbox relay.
type Publisher struct {
	js jetstream.Publisher
}

// NewPublisher returns a Publisher on js (a jetstream.JetStream).
func NewPublisher(js jetstream.Publisher) *Publisher { return &Publisher{js: js} }

var _ idemrt.Publisher = (*Publisher)(nil)

// Publish publishes ev on the subject ev.Topic with Nats-Msg-Id set to
// ev.ID, ev.Headers as headers (and ev.Key in HeaderEventKey), and returns
// nil once the stream has stored it (its PubAck). A re-publish of the same
// id within the stream's duplicate window (StreamConfig.Duplicates, 2
// minutes by default) is acknowledged as a duplicate and not stored again;
// Publish reports it as success, since the event is in the stream.
func (p *Publisher) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	if ev.ID == "" {
		return errors.New("natsidem: publish: the event has no ID")
	}
	if ev.Topic == "" {
		return fmt.Errorf("natsidem: publish %s: the event has no Topic (subject)", ev.ID)
	}
	m := nats.NewMsg(ev.Topic)
	m.Data = ev.Payload
	for k, v := range ev.Headers {
		m.Header.Set(k, v)
	}
	if ev.Key != "" {
		m.Header.Set(HeaderEventKey, ev.Key)
	}
	if _, err := p.js.PublishMsg(ctx, m, jetstream.WithMsgID(ev.ID)); err != nil {
		return fmt.Errorf("natsidem: publish %s to %s: %w", ev.ID, ev.Topic, err)
	}
	return nil
}
