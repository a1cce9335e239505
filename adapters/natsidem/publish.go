package natsidem

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// CheckStreams reports, before a relay starts, a subject that no stream
// stores (every publish to it would fail) or whose stream forgets a
// published id sooner than window (StreamConfig.Duplicates): a relay
// re-publishes an event when it crashed after publishing it (once its
// lease ends) or gave up waiting for the PubAck (after its backoff), and a
// repeat later than the window is stored again, a duplicate that only a
// deduplicating consumer (a Processor) absorbs; any other consumer of the
// stream sees it twice. Pass at least the larger of the relay's Lease and
// MaxBackoff, plus the time a crashed relay takes to come back when it
// runs alone.
func CheckStreams(ctx context.Context, js jetstream.StreamManager, window time.Duration, subjects ...string) error {
	var errs []error
	for _, subject := range subjects {
		name, err := js.StreamNameBySubject(ctx, subject)
		if err != nil {
			errs = append(errs, fmt.Errorf("natsidem: subject %s: no stream stores it: %w", subject, err))
			continue
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("natsidem: subject %s: stream %s: %w", subject, name, err))
			continue
		}
		if d := s.CachedInfo().Config.Duplicates; d < window {
			errs = append(errs, fmt.Errorf("natsidem: subject %s: stream %s drops a re-published Nats-Msg-Id for %v (Duplicates), less than %v: "+
				"an event the outbox relay publishes again later than that is stored twice; raise the stream's Duplicates", subject, name, d, window))
		}
	}
	return errors.Join(errs...)
}
