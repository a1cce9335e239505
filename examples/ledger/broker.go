package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/internal/crashpoint"
)

// brokerConfig is where the events travel: the flags the relay and the
// consumer share, so that both name the same stream, exchange and queue.
type brokerConfig struct {
	kind     string // "nats" (JetStream) or "amqp" (RabbitMQ)
	url      string
	prefix   string // prepended to each event's topic: the NATS subject, the AMQP routing key
	stream   string // NATS: the stream holding the events
	exchange string // AMQP: the topic exchange the relay publishes to
	queue    string // AMQP: the consumer's queue, bound to the exchange for prefix + "#"
}

func (b *brokerConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&b.kind, "broker", "nats", "the broker: nats (JetStream) or amqp (RabbitMQ)")
	fs.StringVar(&b.url, "url", "", "the broker's URL (default nats://127.0.0.1:4222 or amqp://guest:guest@127.0.0.1:5672/)")
	fs.StringVar(&b.prefix, "subject-prefix", "payments.", "prepended to each event's topic (charge.created): the NATS subject or AMQP routing key; ends with a dot")
	fs.StringVar(&b.stream, "stream", "PAYMENTS", "NATS: the JetStream stream of the events (created with subjects <prefix>> if absent)")
	fs.StringVar(&b.exchange, "exchange", "payments", "AMQP: the durable topic exchange of the events (declared if absent)")
	fs.StringVar(&b.queue, "queue", "ledger", "AMQP: the ledger's durable queue, bound to the exchange for <prefix>#; the relay declares it too, so that no event published before the consumer first starts is unroutable")
}

func (b *brokerConfig) check() error {
	switch b.kind {
	case "nats":
		if b.url == "" {
			b.url = nats.DefaultURL
		}
		if b.stream == "" {
			return errors.New("-stream is empty")
		}
	case "amqp":
		if b.url == "" {
			b.url = "amqp://guest:guest@127.0.0.1:5672/"
		}
		if b.exchange == "" || b.queue == "" {
			return errors.New("-exchange and -queue must not be empty")
		}
	default:
		return fmt.Errorf("-broker %q: want nats or amqp", b.kind)
	}
	if !strings.HasSuffix(b.prefix, ".") || strings.ContainsAny(b.prefix, " *>#") {
		return fmt.Errorf("-subject-prefix %q: want tokens ending with a dot (payments.), no wildcards", b.prefix)
	}
	return nil
}

// redactedURL hides the broker URL's password for logs.
func (b *brokerConfig) redactedURL() string {
	if i := strings.LastIndex(b.url, "@"); i >= 0 {
		if j := strings.Index(b.url, "://"); j >= 0 && j < i {
			return b.url[:j+3] + "***" + b.url[i:]
		}
	}
	return b.url
}

// connectNATS connects with reconnection that never gives up: a cut
// connection is re-established when the network comes back, and JetStream
// consumers resume.
func connectNATS(b *brokerConfig, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(b.url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: closed by the process
				log.Warn("broker connection lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("broker connection re-established") }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", b.redactedURL(), err)
	}
	return nc, nil
}

// ensureStream creates the events' stream if it is absent: file storage,
// the subjects under the prefix, and JetStream's duplicate window (2
// minutes) in which a re-published event id is dropped.
func ensureStream(ctx context.Context, js jetstream.JetStream, b *brokerConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, b.stream)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s: %w", b.stream, err)
	}
	s, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       b.stream,
		Subjects:   []string{b.prefix + ">"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, b.stream) // the other process created it first
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", b.stream, err)
	}
	return s, nil
}

// declareAMQP declares, idempotently, the durable topic exchange, the
// ledger's durable queue and its binding.
func declareAMQP(ch *amqp.Channel, b *brokerConfig) error {
	if err := ch.ExchangeDeclare(b.exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", b.exchange, err)
	}
	if _, err := ch.QueueDeclare(b.queue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare queue %s: %w", b.queue, err)
	}
	if err := ch.QueueBind(b.queue, b.prefix+"#", b.exchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s to %s: %w", b.queue, b.exchange, err)
	}
	return nil
}

// dialAMQP opens a connection and declares the topology on it.
func dialAMQP(b *brokerConfig) (*amqp.Connection, error) {
	conn, err := amqp.Dial(b.url)
	if err != nil {
		return nil, fmt.Errorf("amqp %s: %w", b.redactedURL(), err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = declareAMQP(ch, b)
		ch.Close()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// parseFlags parses args into fs, after setting each flag from its
// LEDGER_<NAME> environment variable (upper case, - as _).
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "LEDGER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("$%s: %v", env, e)
			}
		}
	})
	if err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// crashFlag registers -crash-at (LEDGER_CRASH_AT), a test hook.
func crashFlag(fs *flag.FlagSet, point string) *string {
	return fs.String("crash-at", "", "for tests: SIGKILL the process itself once at "+point+"[:N], the N-th time it is reached")
}

func parseCrash(spec, point string) (*crashpoint.Point, error) {
	p, err := crashpoint.Parse(spec, point)
	if err != nil {
		return nil, fmt.Errorf("-crash-at: %v", err)
	}
	return p, nil
}

func newLogger(stderr io.Writer, process string) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, nil)).With("process", process)
}
