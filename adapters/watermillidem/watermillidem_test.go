package watermillidem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/adapters/internal/msgtest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type counts struct {
	processed, duplicate, retried, refused atomic.Int64
}

func (c *counts) hooks() Hooks {
	rec := func(n *atomic.Int64) func(context.Context, Event) {
		return func(context.Context, Event) { n.Add(1) }
	}
	return Hooks{Processed: rec(&c.processed), Duplicate: rec(&c.duplicate), Retried: rec(&c.retried), Refused: rec(&c.refused)}
}

// pubsub is a Watermill publisher and subscriber on one broker.
type pubsub struct {
	pub message.Publisher
	sub message.Subscriber
}

// runRouter runs a router with one handler on topic "in" behind Stack
// (poison queue on topic "poison", 2 retries) until the test ends.
func runRouter(t *testing.T, ps pubsub, in, poison string, cfg Config, h message.NoPublishHandlerFunc) {
	t.Helper()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	stack, err := Stack(cfg, ps.pub, poison, middleware.Retry{MaxRetries: 2, InitialInterval: 50 * time.Millisecond, Multiplier: 2})
	if err != nil {
		t.Fatal(err)
	}
	router.AddConsumerHandler("ledger", in, ps.sub, h).AddMiddleware(stack...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	select {
	case <-router.Running():
	case <-time.After(10 * time.Second):
		t.Fatal("the router did not start")
	}
}

// exercise publishes, through ps, every id twice, a message without an id
// and a message whose handler always fails, and checks that each id's
// effect commits once, the duplicates run nothing, the id-less message is
// refused straight to the poison topic and the failing one goes there
// after its retries.
func exercise(t *testing.T, b *msgtest.Backend, ps pubsub, in, poison string) {
	var runs atomic.Int64
	var mu sync.Mutex
	attempts := map[string]int{}
	var c counts
	poisoned, err := ps.sub.Subscribe(context.Background(), poison)
	if err != nil {
		t.Fatal(err)
	}
	var poisonMu sync.Mutex
	var poisonMsgs []*message.Message
	go func() {
		for m := range poisoned {
			poisonMu.Lock()
			poisonMsgs = append(poisonMsgs, m)
			poisonMu.Unlock()
			m.Ack()
		}
	}()
	runRouter(t, ps, in, poison, Config{Store: b.Store, Consumer: "ledger", Hooks: c.hooks()}, func(msg *message.Message) error {
		runs.Add(1)
		mu.Lock()
		attempts[msg.UUID]++
		mu.Unlock()
		if err := b.Write(msg.Context(), msg.UUID); err != nil {
			return err
		}
		if strings.HasPrefix(msg.UUID, "poison") {
			return errors.New("boom")
		}
		return nil
	})
	const n = 20
	for i := range n {
		for range 2 {
			if err := ps.pub.Publish(in, message.NewMessage(fmt.Sprintf("ev-%d", i), []byte(fmt.Sprint(i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ps.pub.Publish(in, message.NewMessage("", []byte(`{"no":"id"}`))); err != nil {
		t.Fatal(err)
	}
	if err := ps.pub.Publish(in, message.NewMessage("poison-1", []byte(`{"bad":true}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "every message to be settled", func() bool {
		poisonMu.Lock()
		defer poisonMu.Unlock()
		return c.processed.Load()+c.duplicate.Load() == 2*n && len(poisonMsgs) == 2
	})
	if got := runs.Load(); got != n+3 {
		t.Errorf("handler ran %d times, want %d (each id once, the failing message 3 times)", got, n+3)
	}
	for i := range n {
		if got := b.Effects(t, fmt.Sprintf("ev-%d", i)); got != 1 {
			t.Errorf("ev-%d committed %d times", i, got)
		}
	}
	if b.Effects(t, "poison-1") != 0 || attempts["poison-1"] != 3 || c.refused.Load() != 1 {
		t.Errorf("poison: %d effects, %d attempts (want 0, 3); %d refusals (want 1)", b.Effects(t, "poison-1"), attempts["poison-1"], c.refused.Load())
	}
	poisonMu.Lock()
	defer poisonMu.Unlock()
	reasons := map[string]string{}
	for _, m := range poisonMsgs {
		reasons[m.UUID] = m.Metadata.Get(middleware.ReasonForPoisonedKey)
	}
	if !strings.Contains(reasons[""], ErrRefused.Error()) || !strings.Contains(reasons["poison-1"], "boom") {
		t.Errorf("poison reasons %q", reasons)
	}
}

func TestGoChannel(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		gc := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 64}, watermill.NopLogger{})
		t.Cleanup(func() { gc.Close() })
		exercise(t, b, pubsub{pub: gc, sub: gc}, "in", "poison")
	})
}

// The same on RabbitMQ through watermill-amqp, whose marshaler carries the
// message UUID in a header: a broker-side pub/sub gains durable
// deduplication.
func TestWatermillAMQP(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		url := msgtest.AMQPURL(t)
		cfg := wamqp.NewDurableQueueConfig(url)
		pub, err := wamqp.NewPublisher(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatalf("IDEMGEN_TEST_AMQP=%s does not answer: %v", url, err)
		}
		t.Cleanup(func() { pub.Close() })
		sub, err := wamqp.NewSubscriber(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		sfx := msgtest.Suffix()
		in, poison := "idemgen.wm."+sfx, "idemgen.wm."+sfx+".poison"
		for _, q := range []string{in, poison} {
			if err := sub.SubscribeInitialize(q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { deleteQueues(t, url, in, poison) })
		exercise(t, b, pubsub{pub: pub, sub: sub}, in, poison)
	})
}

func TestMiddlewareChecksConfig(t *testing.T) {
	st := idemrt.NewMemoryStore()
	for name, cfg := range map[string]Config{
		"no store":    {Consumer: "c"},
		"no consumer": {Store: st},
		"bad pointer": {Store: st, Consumer: "c", ID: BodyID("id")},
	} {
		if _, err := Middleware(cfg); err == nil {
			t.Errorf("%s: Middleware accepted %+v", name, cfg)
		}
	}
}

// The transaction is in the handler's msg.Context() and only there: the
// message's context is restored after the handler.
func TestContextCarriesTheTransaction(t *testing.T) {
	mw, err := Middleware(Config{Store: idemrt.NewMemoryStore(), Consumer: "c", ID: MetadataID("event-id")})
	if err != nil {
		t.Fatal(err)
	}
	var inside bool
	h := mw(func(msg *message.Message) ([]*message.Message, error) {
		_, inside = idemrt.TxFromContext(msg.Context())
		return []*message.Message{message.NewMessage("out", nil)}, nil
	})
	msg := message.NewMessage("u1", nil)
	msg.Metadata.Set("event-id", "e1")
	out, err := h(msg)
	if err != nil || !inside || len(out) != 1 {
		t.Fatalf("first delivery: %v, tx in context %v, %d produced", err, inside, len(out))
	}
	if _, ok := idemrt.TxFromContext(msg.Context()); ok {
		t.Error("the transaction stayed in the message's context after the handler")
	}
	again := message.NewMessage("u2", nil)
	again.Metadata.Set("event-id", "e1")
	inside = false
	if out, err := h(again); err != nil || inside || out != nil {
		t.Errorf("duplicate: %v, ran %v, produced %v", err, inside, out)
	}
}

func deleteQueues(t *testing.T, url string, queues ...string) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Errorf("delete queues: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("delete queues: %v", err)
		return
	}
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Errorf("delete queue %s: %v", q, err)
		}
	}
}

// outage is a message store whose database is down while down is set.
type outage struct {
	idemrt.MessageStore
	down atomic.Bool
}

func (o *outage) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	if o.down.Load() {
		return nil, errors.New("database unavailable")
	}
	return o.MessageStore.BeginTx(ctx)
}

// A store failure (the database down) says nothing about the message: it
// outlasts the retries, but the message must not go to the poison queue
// (acked there, it would never reach the handler once the database is
// back). It goes back to the broker and is handled after the outage.
func TestStoreOutageIsNotPoisoned(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		url := msgtest.AMQPURL(t)
		cfg := wamqp.NewDurableQueueConfig(url)
		pub, err := wamqp.NewPublisher(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatalf("IDEMGEN_TEST_AMQP=%s does not answer: %v", url, err)
		}
		t.Cleanup(func() { pub.Close() })
		sub, err := wamqp.NewSubscriber(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		sfx := msgtest.Suffix()
		in, poison := "idemgen.wm."+sfx, "idemgen.wm."+sfx+".poison"
		for _, q := range []string{in, poison} {
			if err := sub.SubscribeInitialize(q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { deleteQueues(t, url, in, poison) })
		poisoned, err := sub.Subscribe(context.Background(), poison)
		if err != nil {
			t.Fatal(err)
		}
		var npoison atomic.Int64
		go func() {
			for m := range poisoned {
				npoison.Add(1)
				m.Ack()
			}
		}()
		st := &outage{MessageStore: b.Store}
		st.down.Store(true)
		var c counts
		runRouter(t, pubsub{pub: pub, sub: sub}, in, poison, Config{Store: st, Consumer: "ledger", Hooks: c.hooks()}, func(msg *message.Message) error {
			return b.Write(msg.Context(), msg.UUID)
		})
		if err := pub.Publish(in, message.NewMessage("ev-1", []byte("1"))); err != nil {
			t.Fatal(err)
		}
		// Runs of 3 attempts (2 retries): past the first run's retries.
		eventually(t, 20*time.Second, "the store failure to outlast the retries", func() bool { return c.retried.Load() >= 5 || npoison.Load() > 0 })
		st.down.Store(false)
		eventually(t, 20*time.Second, "the message to be handled once the database is back", func() bool {
			return c.processed.Load() == 1 || npoison.Load() > 0
		})
		if npoison.Load() != 0 || b.Effects(t, "ev-1") != 1 {
			t.Errorf("%d messages poisoned by a store outage; ev-1 committed %d times, want 1", npoison.Load(), b.Effects(t, "ev-1"))
		}
	})
}
