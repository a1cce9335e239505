package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/adapters/amqpidem"
	"github.com/idemgen/idemgen/adapters/natsidem"
	"github.com/idemgen/idemgen/examples/ledger/internal/ledgerstore"
	"github.com/idemgen/idemgen/internal/crashpoint"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// crashAfterPublish is the relay's -crash-at point: the broker has
// accepted an event (PubAck, publisher confirm) and the relay has not
// marked it sent, so the next relay publishes it again.
const crashAfterPublish = "after-publish"

type relayConfig struct {
	broker    brokerConfig
	dsn       string
	batch     int
	lease     time.Duration
	poll      time.Duration
	retention time.Duration
	crash     *crashpoint.Point
}

func runRelay(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var c relayConfig
	fs := flag.NewFlagSet("ledger relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.broker.register(fs)
	fs.StringVar(&c.dsn, "dsn", "", "the payments example's PostgreSQL database, whose outbox table is relayed (postgres://...); required")
	fs.IntVar(&c.batch, "batch", idemrt.DefaultRelayBatch, "events claimed at once")
	fs.DurationVar(&c.lease, "lease", idemrt.DefaultRelayLease, "how long a claim holds its events: a relay that dies holding some delays them this long")
	fs.DurationVar(&c.poll, "poll", idemrt.DefaultRelayInterval, "the wait after a claim that found less than a batch")
	fs.DurationVar(&c.retention, "retention", idemrt.DefaultRelayRetention, "how long sent events stay in the outbox before they are swept")
	crash := crashFlag(fs, crashAfterPublish)
	err := parseFlags(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = c.broker.check()
	}
	if err == nil && c.dsn == "" {
		err = errors.New("-dsn (the payments database) is required")
	}
	if err == nil && (c.batch < 1 || c.lease <= 0 || c.poll <= 0 || c.retention <= 0) {
		err = errors.New("-batch, -lease, -poll and -retention must be positive")
	}
	if err == nil {
		c.crash, err = parseCrash(*crash, crashAfterPublish)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ledger relay:", err)
		return 2
	}
	log := newLogger(stderr, "relay")
	if err := relay(ctx, c, log); err != nil && ctx.Err() == nil {
		log.Error("relay stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// relay publishes the payments outbox until ctx ends.
//
// The outbox table is the payments example's (examples/payments writes it
// through its own generated package). The relay reads it through this
// module's generated PostgreSQL store: idemgen generates the same outbox
// table and statements for every PostgreSQL store with the same -table
// (the default here and there), so any of them can relay another's
// outbox. The relay does not create the table: it must exist.
func relay(ctx context.Context, c relayConfig, log *slog.Logger) error {
	pc, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return fmt.Errorf("-dsn: %w", err)
	}
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	var table string
	if err := pool.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::text, '')`, outboxTable).Scan(&table); err != nil {
		return err
	}
	if table == "" {
		return fmt.Errorf("the database has no %s table: is -dsn the payments database, and has the payments server started on it once?", outboxTable)
	}
	store, err := ledgerstore.NewStore(ctx, pool)
	if err != nil {
		return err
	}
	pub, closePub, err := publisher(ctx, &c.broker, c.lease, log)
	if err != nil {
		return err
	}
	defer closePub()
	r := &idemrt.Relay{
		Store:     store,
		Publisher: crashingPublisher{Publisher: prefixed{pub, c.broker.prefix}, crash: c.crash},
		Batch:     c.batch,
		Lease:     c.lease,
		Interval:  c.poll,
		Retention: c.retention,
		Logger:    log,
		Hooks: idemrt.RelayHooks{
			PublishFailed: func(ctx context.Context, ev idemrt.OutboxEvent, err error) {
				log.WarnContext(ctx, "publish failed; the event and the later ones of its key are released and retried", "event", ev.ID, "err", err)
			},
		},
	}
	log.Info("relaying", "broker", c.broker.kind, "url", c.broker.redactedURL(), "batch", c.batch, "lease", c.lease)
	return r.Run(ctx)
}

// outboxTable is the generated store's outbox (its -table is the default).
const outboxTable = "idempotency_keys_outbox"

// publisher connects to the broker and returns the adapter's Publisher.
// On JetStream it refuses a stream whose duplicate window is shorter than
// the relay's re-publish horizon (the lease, or the longest backoff, plus
// a minute for a crashed relay to come back): a re-publish later than the
// window would be stored twice.
func publisher(ctx context.Context, b *brokerConfig, lease time.Duration, log *slog.Logger) (idemrt.Publisher, func(), error) {
	switch b.kind {
	case "nats":
		nc, err := connectNATS(b, "ledger-relay", log)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = ensureStream(ctx, js, b)
		}
		if err == nil {
			window := max(lease, idemrt.DefaultRelayMaxBackoff) + time.Minute
			err = natsidem.CheckStreams(ctx, js, window, b.prefix+topicChargeCreated, b.prefix+topicRefundCreated)
		}
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return natsidem.NewPublisher(js), nc.Close, nil
	default:
		// The Publisher dials again, on its next Publish, after its
		// connection closed; each dial declares the exchange and queue.
		p, err := amqpidem.NewPublisher(func() (*amqp.Connection, error) { return dialAMQP(b) }, b.exchange)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { p.Close() }, nil
	}
}

// prefixed publishes each event under the broker's subject prefix.
type prefixed struct {
	idemrt.Publisher
	prefix string
}

func (p prefixed) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	ev.Topic = p.prefix + ev.Topic
	return p.Publisher.Publish(ctx, ev)
}

// crashingPublisher is the -crash-at hook: an event the broker accepted
// reaches the point before the relay can mark it sent.
type crashingPublisher struct {
	idemrt.Publisher
	crash *crashpoint.Point
}

func (p crashingPublisher) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	err := p.Publisher.Publish(ctx, ev)
	if err == nil {
		p.crash.Reached(crashAfterPublish, "event", ev.ID)
	}
	return err
}
