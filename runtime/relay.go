package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Relay publishes the events of an outbox: it claims a batch of unsent
// events with a lease (OutboxStore.ClaimEvents), publishes them one after
// another in order through the Publisher, marks the published ones sent,
// and now and then sweeps sent events older than Retention.
//
// Several relays (in one process or many) may run on one outbox: a claim
// leases its events, so another relay skips them until the lease ends.
// A relay that crashes after publishing and before marking its batch sent
// leaves the events leased; when the lease ends another relay (or the same
// one restarted) publishes them again, with the same ids: the broker's
// duplicate window and the consumer's ProcessOnce drop the repeat. So the
// relay publishes every committed event at least once, and the broker and
// consumer make it once in effect (docs/messaging.md).
//
// The zero values of the optional fields are the defaults.
type Relay struct {
	Store     OutboxStore
	Publisher Publisher

	// Batch is how many events one claim leases (default 100).
	Batch int
	// Lease is how long a claim holds its events (default 30 s). A batch
	// is published within its lease, counted from when the claim was sent:
	// the publishing context ends with it, and events not published by
	// then are released.
	Lease time.Duration
	// Interval is how long the relay waits after a claim that found fewer
	// than Batch events (default 200 ms). A full batch is followed by the
	// next claim at once.
	Interval time.Duration
	// Retention is how long sent events are kept before they are swept
	// (default 24 h); negative keeps them for ever. SweepEvery is how
	// often the relay sweeps (default 1 min).
	Retention  time.Duration
	SweepEvery time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed round (a
	// store error, or Publisher errors with nothing published): it starts
	// at MinBackoff (default 100 ms) and doubles up to MaxBackoff (default
	// 30 s), and a round that publishes resets it.
	MinBackoff time.Duration
	MaxBackoff time.Duration

	Hooks  RelayHooks
	Logger *slog.Logger
}

// RelayHooks are optional callbacks of a Relay (adapters/otelidem turns
// them into metrics). Nil fields are skipped.
type RelayHooks struct {
	// Published: the broker accepted ev. Latency is the time from the
	// event's CreatedAt (its insert, on the database's clock) to the
	// acknowledgement (on the relay's clock).
	Published func(ctx context.Context, ev OutboxEvent, latency time.Duration)
	// PublishFailed: the Publisher returned err for ev; ev and the later
	// events of its key in the batch are released (see Relay.round).
	PublishFailed func(ctx context.Context, ev OutboxEvent, err error)
	// StoreFailed: an outbox operation ("claim", "mark_sent", "release",
	// "sweep") failed.
	StoreFailed func(ctx context.Context, op string, err error)
	// Swept: a sweep deleted n sent events.
	Swept func(ctx context.Context, n int)
}

// Defaults of Relay.
const (
	DefaultRelayBatch      = 100
	DefaultRelayLease      = 30 * time.Second
	DefaultRelayInterval   = 200 * time.Millisecond
	DefaultRelayRetention  = 24 * time.Hour
	DefaultRelaySweepEvery = time.Minute
	DefaultRelayMinBackoff = 100 * time.Millisecond
	DefaultRelayMaxBackoff = 30 * time.Second
)

func (r *Relay) withDefaults() (Relay, error) {
	c := *r
	if c.Store == nil || c.Publisher == nil {
		return c, errors.New("idempotency: Relay needs a Store and a Publisher")
	}
	if c.Batch < 0 || c.Lease < 0 || c.Interval < 0 || c.SweepEvery < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return c, errors.New("idempotency: Relay: Batch, Lease, Interval, SweepEvery and the backoffs must not be negative")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Batch == 0 {
		c.Batch = DefaultRelayBatch
	}
	def(&c.Lease, DefaultRelayLease)
	def(&c.Interval, DefaultRelayInterval)
	def(&c.Retention, DefaultRelayRetention)
	def(&c.SweepEvery, DefaultRelaySweepEvery)
	def(&c.MinBackoff, DefaultRelayMinBackoff)
	def(&c.MaxBackoff, DefaultRelayMaxBackoff)
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	return c, nil
}

// Run relays until ctx ends, then returns nil (after marking sent what it
// published, and releasing what it did not). It returns an error only for
// a Relay it cannot run (no Store or Publisher, negative settings).
func (r *Relay) Run(ctx context.Context) error {
	c, err := r.withDefaults()
	if err != nil {
		return err
	}
	var backoff time.Duration
	nextSweep := time.Now()
	for {
		if c.Retention > 0 && !time.Now().Before(nextSweep) {
			c.sweep(ctx)
			nextSweep = time.Now().Add(c.SweepEvery)
		}
		n, published, err := c.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && published > 0 {
			// Some events failed, others went out (a poison event, such
			// as one the broker refuses for its size, holds up only its
			// key): no backoff, or one such event would slow every key.
			c.log(ctx, slog.LevelWarn, "idempotency: relay round published some events and failed others", slog.Any("error", err))
		}
		var wait time.Duration
		switch {
		case err != nil && published == 0:
			backoff = min(max(2*backoff, c.MinBackoff), c.MaxBackoff)
			wait = backoff
			c.log(ctx, slog.LevelWarn, "idempotency: relay round failed", slog.Any("error", err), slog.Duration("backoff", wait))
		case n == c.Batch:
			backoff = 0
			continue
		default:
			backoff = 0
			wait = c.Interval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// RunOnce claims one batch, publishes it and marks it sent, and reports
// how many events it claimed (all of them published when err is nil). It
// neither sweeps nor backs off: Run does.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	c, err := r.withDefaults()
	if err != nil {
		return 0, err
	}
	n, _, err := c.round(ctx)
	return n, err
}

// Sweep deletes sent events older than Retention, in batches of Batch,
// and reports how many it deleted.
func (r *Relay) Sweep(ctx context.Context) (int, error) {
	c, err := r.withDefaults()
	if err != nil {
		return 0, err
	}
	return c.sweep(ctx)
}

// relayBookkeeping bounds a round's store calls after publishing (MarkSent,
// ReleaseEvents), which run even when the relay's context has ended.
var relayBookkeeping = 10 * time.Second

// round is one claim, publish, mark. It reports how many events it
// claimed and how many of them it published.
//
// A Publisher error holds up the failing event's key: the event and the
// later events of its key in the batch are released, in order, and the
// relay goes on with the other keys (an event with an empty key holds up
// nothing else), so that one event the broker refuses (too large, an
// invalid subject) does not stall the whole outbox, until its key has
// Batch unsent events: the claim takes the oldest, so every batch is then
// that key's alone. Two failures in a row stop the batch: the broker, not
// one event, is failing.
func (c *Relay) round(ctx context.Context) (claimed, published int, err error) {
	// The lease starts at the database while the claim runs: no earlier
	// than now, and maybe well before its answer arrives here (a slow
	// network, a paused process). So the publishing deadline counts from
	// now, never from the answer, or the relay could go on publishing
	// after another relay claimed the same events.
	start := time.Now()
	evs, err := c.Store.ClaimEvents(ctx, c.Batch, c.Lease)
	if err != nil {
		c.storeFailed(ctx, "claim", err)
		return 0, 0, fmt.Errorf("idempotency: relay: %w", err)
	}
	if len(evs) == 0 {
		return 0, 0, nil
	}
	// Publish within the lease: after it another relay may claim the same
	// events. The bookkeeping after it runs even when ctx has ended (a
	// shutdown), so that a stopped relay leaves nothing to re-publish.
	pctx, cancel := context.WithDeadline(ctx, start.Add(c.Lease))
	defer cancel()
	sent, unsent, perr := c.publish(ctx, pctx, evs)
	// Bounded from now: publishing may have taken most of the lease.
	bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), relayBookkeeping)
	defer bcancel()
	if len(unsent) > 0 {
		c.release(ctx, bctx, start, unsent)
	}
	if len(sent) > 0 {
		if err := c.Store.MarkSent(bctx, sent); err != nil {
			// The events stay leased and are published again when the
			// lease ends: duplicates, which the ids make harmless.
			c.storeFailed(ctx, "mark_sent", err)
			return len(evs), 0, errors.Join(perr, fmt.Errorf("idempotency: relay: marking %d events sent: %w", len(sent), err))
		}
	}
	return len(evs), len(sent), perr
}

// publish publishes evs in order within pctx and returns the ids it
// published and the events it did not (see round).
func (c *Relay) publish(ctx, pctx context.Context, evs []OutboxEvent) (sent []string, unsent []OutboxEvent, perr error) {
	sent = make([]string, 0, len(evs))
	held := map[string]bool{} // keys whose event failed
	lastFailed := false
	for i, ev := range evs {
		if err := pctx.Err(); err != nil {
			return sent, append(unsent, evs[i:]...), errors.Join(perr, fmt.Errorf("idempotency: relay: publishing stopped: %w", err))
		}
		if ev.Key != "" && held[ev.Key] {
			unsent = append(unsent, ev) // behind its key's failed event
			continue
		}
		if err := c.Publisher.Publish(pctx, ev); err != nil {
			if c.Hooks.PublishFailed != nil {
				c.Hooks.PublishFailed(ctx, ev, err)
			}
			perr = errors.Join(perr, fmt.Errorf("idempotency: relay: publishing event %q: %w", ev.ID, err))
			if lastFailed {
				return sent, append(unsent, evs[i:]...), perr
			}
			lastFailed = true
			unsent = append(unsent, ev)
			if ev.Key != "" {
				held[ev.Key] = true
			}
			continue
		}
		lastFailed = false
		sent = append(sent, ev.ID)
		if c.Hooks.Published != nil {
			c.Hooks.Published(ctx, ev, time.Since(ev.CreatedAt))
		}
	}
	return sent, unsent, perr
}

// release ends the lease of evs (the failing event and the rest of its
// batch, so that the next claim takes them again in order), but only while
// the lease claimed at start lasts: once it may have ended, another relay
// may have claimed them, and a release would end its lease too (a third
// claim would then publish them beside it). Those are claimable again
// already, or as soon as the database's lease ends.
func (c *Relay) release(ctx, bctx context.Context, start time.Time, evs []OutboxEvent) {
	rctx, cancel := context.WithDeadline(bctx, start.Add(c.Lease))
	defer cancel()
	if rctx.Err() != nil {
		return
	}
	if err := c.Store.ReleaseEvents(rctx, ids(evs)); err != nil {
		c.storeFailed(ctx, "release", err)
	}
}

func ids(evs []OutboxEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func (c *Relay) sweep(ctx context.Context) (int, error) {
	if c.Retention < 0 {
		return 0, nil
	}
	total := 0
	for ctx.Err() == nil {
		n, err := c.Store.SweepSent(ctx, c.Retention, c.Batch)
		if err != nil {
			c.storeFailed(ctx, "sweep", err)
			return total, fmt.Errorf("idempotency: relay: sweep: %w", err)
		}
		total += n
		if n > 0 && c.Hooks.Swept != nil {
			c.Hooks.Swept(ctx, n)
		}
		if n < c.Batch {
			break
		}
	}
	if total > 0 {
		c.log(ctx, slog.LevelInfo, "idempotency: relay swept sent events", slog.Int("deleted", total))
	}
	return total, nil
}

func (c *Relay) storeFailed(ctx context.Context, op string, err error) {
	if c.Hooks.StoreFailed != nil {
		c.Hooks.StoreFailed(ctx, op, err)
	}
}

func (c *Relay) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if c.Logger != nil {
		c.Logger.LogAttrs(ctx, level, msg, attrs...)
	}
}
