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

// crashAfterCommit is the consumer's -crash-at point: an event's ledger
// entry and its processed id are committed, and the broker has not been
// told (no ack yet), so it will deliver the event again.
const crashAfterCommit = "after-commit"

type consumeConfig struct {
	broker   brokerConfig
	dsn      string
	name     string        // the consumer's name in the processed-id table
	durable  string        // NATS: the durable consumer
	ackWait  time.Duration // NATS: redelivery of an unacknowledged message
	maxConns int
	crash    *crashpoint.Point
}

func runConsume(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var c consumeConfig
	fs := flag.NewFlagSet("ledger consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.broker.register(fs)
	fs.StringVar(&c.dsn, "dsn", "", "the ledger's PostgreSQL database (postgres://...); required")
	fs.StringVar(&c.name, "consumer", "ledger", "the consumer's name: processed event ids are recorded per name")
	fs.StringVar(&c.durable, "durable", "ledger", "NATS: the durable JetStream consumer (created if absent)")
	fs.DurationVar(&c.ackWait, "ack-wait", 30*time.Second, "NATS: how long the server waits for an ack before it redelivers (for a consumer created here)")
	fs.IntVar(&c.maxConns, "max-conns", 4, "most database connections open at once")
	crash := crashFlag(fs, crashAfterCommit)
	err := parseFlags(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = c.broker.check()
	}
	if err == nil && c.dsn == "" {
		err = errors.New("-dsn (the ledger's PostgreSQL database) is required")
	}
	if err == nil && (c.maxConns < 1 || c.maxConns > 1000 || c.ackWait <= 0) {
		err = errors.New("-max-conns must be 1 to 1000 and -ack-wait positive")
	}
	if err == nil {
		c.crash, err = parseCrash(*crash, crashAfterCommit)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ledger consume:", err)
		return 2
	}
	log := newLogger(stderr, "consume")
	if err := consume(ctx, c, log); err != nil && ctx.Err() == nil {
		log.Error("consumer stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// consume applies events until ctx ends.
func consume(ctx context.Context, c consumeConfig, log *slog.Logger) error {
	pc, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return fmt.Errorf("-dsn: %w", err)
	}
	pc.MaxConns = int32(c.maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := ledgerstore.ApplySchema(ctx, pool); err != nil {
		return err
	}
	if err := applyLedgerSchema(ctx, pool); err != nil {
		return err
	}
	st, err := ledgerstore.NewStore(ctx, pool)
	if err != nil {
		return err
	}
	store := crashingStore{MessageStore: st, crash: c.crash}
	hooks := consumerHooks(log)
	switch c.broker.kind {
	case "nats":
		return consumeNATS(ctx, c, store, hooks, log)
	default:
		return consumeAMQP(ctx, c, store, hooks, log)
	}
}

// applyDelivery is the handler both adapters run inside ProcessOnce: ctx
// carries the transaction that records the event id.
func applyDelivery(ctx context.Context, id, subject string, body []byte) error {
	tx, ok := ledgerstore.TxFromContext(ctx)
	if !ok {
		return errors.New("ledger: no transaction in the handler's context")
	}
	e, err := parseEvent(id, subject, body)
	if err != nil {
		return err
	}
	return apply(ctx, tx, e)
}

// consumerHooks log each duplicate (a redelivery, or a re-publish the
// broker did not drop) at info: the end-to-end test counts them.
func consumerHooks(log *slog.Logger) natsidem.Hooks {
	return natsidem.Hooks{
		Duplicate: func(ctx context.Context, ev natsidem.Event) {
			log.InfoContext(ctx, "duplicate delivery acked without applying", "message_id", ev.MessageID, "subject", ev.Subject, "delivery", ev.Delivery)
		},
	}
}

func consumeNATS(ctx context.Context, c consumeConfig, store idemrt.MessageStore, hooks natsidem.Hooks, log *slog.Logger) error {
	nc, err := connectNATS(&c.broker, "ledger-consume", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := ensureStream(ctx, js, &c.broker)
	if err != nil {
		return err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:    c.durable,
		AckPolicy:  jetstream.AckExplicitPolicy,
		AckWait:    c.ackWait,
		MaxDeliver: -1,
		// One filter for both event subjects (nats-server before 2.10 has
		// no FilterSubjects); it leaves out the dead letters' subject.
		FilterSubject: c.broker.prefix + "*.created",
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", c.durable, c.broker.stream, err)
	}
	p, err := natsidem.New(natsidem.Config{
		Store:               store,
		Consumer:            c.name,
		DeadLetterSubject:   c.broker.prefix + "dead." + c.name,
		DeadLetterPublisher: js,
		Hooks:               hooks,
		Logger:              log,
	}, func(ctx context.Context, msg jetstream.Msg) error {
		return applyDelivery(ctx, msg.Headers().Get(jetstream.MsgIDHeader), msg.Subject(), msg.Data())
	})
	if err != nil {
		return err
	}
	log.Info("consuming", "broker", "nats", "url", c.broker.redactedURL(), "stream", c.broker.stream, "durable", c.durable, "consumer", c.name)
	return p.Consume(ctx, cons)
}

func consumeAMQP(ctx context.Context, c consumeConfig, store idemrt.MessageStore, hooks amqpidem.Hooks, log *slog.Logger) error {
	p, err := amqpidem.New(amqpidem.Config{
		Store:    store,
		Consumer: c.name,
		Queue:    c.broker.queue,
		Hooks:    hooks,
		Logger:   log,
	}, func(ctx context.Context, d amqp.Delivery) error {
		subject := d.RoutingKey
		if rk, ok := d.Headers[amqpidem.HeaderRoutingKey].(string); ok {
			subject = rk // a retry's copy, republished to the queue
		}
		return applyDelivery(ctx, d.MessageId, subject, d.Body)
	})
	if err != nil {
		return err
	}
	// A closed connection or channel ends Consume; unacknowledged
	// deliveries go back to the queue, and the ones already applied are
	// acked as duplicates on their redelivery. Reconnect until ctx ends.
	logged := false
	for wait := 250 * time.Millisecond; ; {
		conn, err := dialAMQP(&c.broker)
		if err == nil {
			ch, cerr := conn.Channel()
			if cerr == nil {
				cerr = p.DeclareTopology(ch)
				ch.Close()
			}
			if cerr != nil {
				conn.Close()
				return cerr
			}
			if !logged {
				log.Info("consuming", "broker", "amqp", "url", c.broker.redactedURL(), "exchange", c.broker.exchange, "queue", c.broker.queue, "consumer", c.name)
				logged = true
			} else {
				log.Info("broker connection re-established")
			}
			wait = 250 * time.Millisecond
			err = p.Consume(ctx, conn)
			conn.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("broker connection lost; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// crashingStore is the consumer's MessageStore with the -crash-at hook:
// the transaction's commit, once it succeeded, reaches the point (before
// the adapter can ack the message).
type crashingStore struct {
	idemrt.MessageStore
	crash *crashpoint.Point
}

func (s crashingStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	tx, err := s.MessageStore.BeginTx(ctx)
	if err != nil || s.crash == nil {
		return tx, err
	}
	return &crashingTx{Tx: tx, crash: s.crash}, nil
}

func (s crashingStore) MarkProcessed(ctx context.Context, tx idemrt.Tx, consumer, messageID string) (bool, error) {
	if t, ok := tx.(*crashingTx); ok {
		t.messageID = messageID
		tx = t.Tx
	}
	return s.MessageStore.MarkProcessed(ctx, tx, consumer, messageID)
}

type crashingTx struct {
	idemrt.Tx
	crash     *crashpoint.Point
	messageID string
}

func (t *crashingTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	if err == nil {
		t.crash.Reached(crashAfterCommit, "message", t.messageID)
	}
	return err
}
