package amqpidem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	"github.com/idemgen/idemgen/adapters/internal/msgtest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// env is one test's queue on the RabbitMQ server of IDEMGEN_TEST_AMQP; the
// queues whose names start with Queue are deleted at the end of the test.
type env struct {
	url   string
	conn  *amqp.Connection
	ch    *amqp.Channel
	Queue string
	names []string
}

func dial(t *testing.T, url string) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("IDEMGEN_TEST_AMQP=%s does not answer: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{url: msgtest.AMQPURL(t)}
	e.conn = dial(t, e.url)
	var err error
	if e.ch, err = e.conn.Channel(); err != nil {
		t.Fatal(err)
	}
	e.Queue = "idemgen." + msgtest.Suffix()
	e.declare(t, e.Queue, nil)
	t.Cleanup(func() {
		conn, err := amqp.Dial(e.url)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		for _, q := range e.names {
			ch.QueueDelete(q, false, false, false)
		}
	})
	return e
}

func (e *env) declare(t *testing.T, name string, args amqp.Table) {
	t.Helper()
	if _, err := e.ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	e.names = append(e.names, name)
}

func (e *env) processor(t *testing.T, cfg Config, h Handler) *Processor {
	t.Helper()
	cfg.Queue = e.Queue
	p, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.DeclareTopology(e.ch); err != nil {
		t.Fatal(err)
	}
	for _, d := range p.cfg.RetryDelays {
		e.names = append(e.names, p.RetryQueue(d))
	}
	e.names = append(e.names, p.DeadLetterQueue())
	return p
}

// run consumes with p on conn until the test ends.
func (e *env) run(t *testing.T, p *Processor, conn *amqp.Connection) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Consume(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Consume: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Consume did not return within 10s of its context's end")
		}
	})
}

func (e *env) publish(t *testing.T, msg amqp.Publishing) {
	t.Helper()
	if err := e.ch.PublishWithContext(context.Background(), "", e.Queue, false, false, msg); err != nil {
		t.Fatal(err)
	}
}

// settled waits until the queue holds no message and none is unacked
// (a queue's count excludes unacked messages; its consumers' prefetch is
// checked through a passive declare after the consumers stopped, so poll
// on the hooks first).
func (e *env) count(t *testing.T, queue string) int {
	t.Helper()
	q, err := e.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

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
	processed, duplicate, retried, dead, refused atomic.Int64
}

func (c *counts) hooks() Hooks {
	rec := func(n *atomic.Int64) func(context.Context, Event) {
		return func(context.Context, Event) { n.Add(1) }
	}
	return Hooks{Processed: rec(&c.processed), Duplicate: rec(&c.duplicate), Retried: rec(&c.retried),
		DeadLettered: rec(&c.dead), Refused: rec(&c.refused)}
}

// unacked is the number of messages delivered to consumers and not acked.
func (e *env) unacked(t *testing.T) int {
	t.Helper()
	// RabbitMQ reports ready messages to a passive declare; delivered but
	// unacked ones come back when their channel closes, so the tests stop
	// their consumers before counting.
	return e.count(t, e.Queue)
}

// Three processors (each its own connection) on one queue, every id
// published twice: each id's effect commits once, the duplicates are
// acked without running.
func TestOnceUnderDuplicatesAndConcurrency(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t)
		var runs atomic.Int64
		var c counts
		for range 3 {
			p := e.processor(t, Config{Store: b.Store, Consumer: "ledger", Prefetch: 4, Hooks: c.hooks()},
				func(ctx context.Context, d amqp.Delivery) error {
					runs.Add(1)
					return b.Write(ctx, d.MessageId)
				})
			e.run(t, p, dial(t, e.url))
		}
		const n = 30
		for i := range n {
			for range 2 {
				e.publish(t, amqp.Publishing{MessageId: fmt.Sprintf("ev-%d", i), DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprint(i))})
			}
		}
		eventually(t, 20*time.Second, "every delivery to be settled", func() bool {
			return c.processed.Load()+c.duplicate.Load() >= 2*n
		})
		if got := runs.Load(); got != n {
			t.Errorf("handler ran %d times, want %d", got, n)
		}
		if got := c.duplicate.Load(); got != n {
			t.Errorf("%d duplicates acked, want %d", got, n)
		}
		for i := range n {
			if got := b.Effects(t, fmt.Sprintf("ev-%d", i)); got != 1 {
				t.Errorf("ev-%d committed %d times", i, got)
			}
		}
		if q := e.unacked(t); q != 0 {
			t.Errorf("%d messages left in the queue", q)
		}
	})
}

// The consumer crashes after its commit and before its ack (its
// connection closes): RabbitMQ requeues the unacked delivery, the
// restarted consumer acks it as a duplicate, and the handler ran once.
func TestCrashBetweenCommitAndAck(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t)
		var runs atomic.Int64
		h := func(ctx context.Context, d amqp.Delivery) error {
			runs.Add(1)
			return b.Write(ctx, d.MessageId)
		}
		var first counts
		p1 := e.processor(t, Config{Store: b.Store, Consumer: "ledger", Hooks: first.hooks()}, h)
		conn1 := dial(t, e.url)
		committed := make(chan struct{})
		p1.afterCommit = func(r delivery.Result) {
			if r.Ran {
				conn1.Close()
				close(committed)
			}
		}
		done1 := make(chan error, 1)
		go func() { done1 <- p1.Consume(context.Background(), conn1) }()
		e.publish(t, amqp.Publishing{MessageId: "m1", DeliveryMode: amqp.Persistent, Body: []byte(`{"amount":1}`)})
		select {
		case <-committed:
		case <-time.After(10 * time.Second):
			t.Fatal("the first process did not commit")
		}
		if err := <-done1; err == nil {
			t.Error("Consume returned nil after its connection closed")
		}
		var second counts
		p2 := e.processor(t, Config{Store: b.Store, Consumer: "ledger", Hooks: second.hooks()}, h)
		e.run(t, p2, dial(t, e.url))
		eventually(t, 10*time.Second, "the redelivery to be acked as a duplicate", func() bool { return second.duplicate.Load() == 1 })
		if runs.Load() != 1 || b.Effects(t, "m1") != 1 || second.processed.Load() != 0 || first.processed.Load() != 1 {
			t.Errorf("handler ran %d times, %d effects, processed %d then %d; want 1, 1, 1, 0",
				runs.Load(), b.Effects(t, "m1"), first.processed.Load(), second.processed.Load())
		}
	})
}

// A failing handler's message waits in the retry queues (TTL, then
// dead-lettered back to the queue) and goes to the dead-letter queue on
// delivery MaxDeliveries; nothing of it commits. A message that fails once
// succeeds on its redelivery.
func TestRetryBackoffThenDeadLetter(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t)
		var mu sync.Mutex
		calls := map[string][]time.Time{}
		delays := []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}
		var c counts
		p := e.processor(t, Config{Store: b.Store, Consumer: "ledger", MaxDeliveries: 3, RetryDelays: delays, Hooks: c.hooks()},
			func(ctx context.Context, d amqp.Delivery) error {
				mu.Lock()
				calls[d.MessageId] = append(calls[d.MessageId], time.Now())
				n := len(calls[d.MessageId])
				mu.Unlock()
				if err := b.Write(ctx, d.MessageId); err != nil {
					return err
				}
				if d.MessageId == "poison" || n == 1 {
					return fmt.Errorf("boom %d", n)
				}
				return nil
			})
		e.run(t, p, dial(t, e.url))
		e.publish(t, amqp.Publishing{MessageId: "poison", Headers: amqp.Table{"Trace": "t-1"}, ContentType: "application/json", Body: []byte(`{"bad":true}`)})
		e.publish(t, amqp.Publishing{MessageId: "flaky", Body: []byte(`{"ok":true}`)})
		eventually(t, 10*time.Second, "the poison message to be dead-lettered", func() bool { return c.dead.Load() == 1 })
		eventually(t, 10*time.Second, "the flaky message to be processed", func() bool { return c.processed.Load() == 1 })
		mu.Lock()
		poison, flaky := calls["poison"], calls["flaky"]
		mu.Unlock()
		if len(poison) != 3 || len(flaky) != 2 {
			t.Fatalf("poison ran %d times (want 3), flaky %d (want 2)", len(poison), len(flaky))
		}
		for i := 1; i < len(poison); i++ {
			if gap := poison[i].Sub(poison[i-1]); gap < delays[i-1] {
				t.Errorf("delivery %d came %v after delivery %d, before its delay %v", i+1, gap, i, delays[i-1])
			}
		}
		if b.Effects(t, "poison") != 0 || b.Effects(t, "flaky") != 1 {
			t.Errorf("effects: poison %d (want 0), flaky %d (want 1)", b.Effects(t, "poison"), b.Effects(t, "flaky"))
		}
		m, ok, err := e.ch.Get(p.DeadLetterQueue(), true)
		if err != nil || !ok {
			t.Fatalf("dead-letter queue: %v, %v", ok, err)
		}
		if m.MessageId != "poison" || string(m.Body) != `{"bad":true}` || m.ContentType != "application/json" ||
			m.Headers["Trace"] != "t-1" || m.Headers[HeaderDeadReason] != "failed" || m.Headers[HeaderRoutingKey] != e.Queue ||
			!strings.Contains(fmt.Sprint(m.Headers[HeaderDeadError]), "boom 3") || m.DeliveryMode != amqp.Persistent {
			t.Errorf("dead letter: id %q body %q headers %v", m.MessageId, m.Body, m.Headers)
		}
		for _, q := range []string{e.Queue, p.DeadLetterQueue(), p.RetryQueue(delays[0]), p.RetryQueue(delays[1])} {
			if n := e.count(t, q); n != 0 {
				t.Errorf("%s holds %d messages", q, n)
			}
		}
	})
}

// A message without a message-id (or whose declared source finds none)
// is refused loudly: not processed, moved to the dead-letter queue, acked.
func TestRefusesMessagesWithoutID(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t)
		var runs atomic.Int64
		var c counts
		p := e.processor(t, Config{Store: b.Store, Consumer: "ledger", Hooks: c.hooks()},
			func(ctx context.Context, d amqp.Delivery) error { runs.Add(1); return b.Write(ctx, "x") })
		e.run(t, p, dial(t, e.url))
		e.publish(t, amqp.Publishing{Body: []byte(`{"no":"id"}`)})
		eventually(t, 10*time.Second, "the refusal", func() bool { return c.refused.Load() == 1 })
		m, ok, err := e.ch.Get(p.DeadLetterQueue(), true)
		if err != nil || !ok {
			t.Fatalf("dead-letter queue: %v, %v", ok, err)
		}
		if m.Headers[HeaderDeadReason] != "refused" || !strings.Contains(fmt.Sprint(m.Headers[HeaderDeadError]), delivery.ErrNoID.Error()) {
			t.Errorf("dead letter headers %v", m.Headers)
		}
		if runs.Load() != 0 || b.Total(t) != 0 || e.count(t, e.Queue) != 0 {
			t.Errorf("handler ran %d times for a message without an id", runs.Load())
		}
	})
}

// The Publisher sets message-id and persistence, waits for the confirm,
// reports an unroutable event as an error, and recovers from a channel
// error; a re-published event is processed once by the consumer.
func TestPublisher(t *testing.T) {
	e := newEnv(t)
	pub, err := NewPublisher(func() (*amqp.Connection, error) { return amqp.Dial(e.url) }, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	ev := idemrt.OutboxEvent{ID: "ev-1", Topic: e.Queue, Key: "ch_1", Payload: []byte(`{"amount":5}`),
		Headers: map[string]string{"Type": "charge.created"}, CreatedAt: time.Unix(1_800_000_000, 0)}
	for range 2 { // a relay that crashed before marking the event sent publishes it again
		if err := pub.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctx, idemrt.OutboxEvent{ID: "ev-2", Topic: "idemgen.nobody." + msgtest.Suffix()}); err == nil || !strings.Contains(err.Error(), "unroutable") {
		t.Errorf("publishing an event no queue is bound for: %v; want unroutable", err)
	}
	bad, err := NewPublisher(func() (*amqp.Connection, error) { return amqp.Dial(e.url) }, "idemgen.noexchange."+msgtest.Suffix())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Publish(ctx, ev); err == nil {
		t.Error("publishing to a missing exchange succeeded")
	}
	// The channel error closed the channel; the next publish opens another.
	bad.exchange = ""
	if err := bad.Publish(ctx, idemrt.OutboxEvent{ID: "ev-1", Topic: e.Queue}); err != nil {
		t.Errorf("publish after a channel error: %v", err)
	}
	if err := pub.Publish(ctx, idemrt.OutboxEvent{Topic: e.Queue}); err == nil {
		t.Error("publishing an event without an id succeeded")
	}
	m, ok, err := e.ch.Get(e.Queue, true)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if m.MessageId != "ev-1" || m.DeliveryMode != amqp.Persistent || m.Headers["Type"] != "charge.created" ||
		m.Headers[HeaderEventKey] != "ch_1" || !m.Timestamp.Equal(ev.CreatedAt) || string(m.Body) != `{"amount":5}` {
		t.Errorf("published: %+v", m)
	}
	b := msgtest.Memory()
	var c counts
	p := e.processor(t, Config{Store: b.Store, Consumer: "ledger", Hooks: c.hooks()},
		func(ctx context.Context, d amqp.Delivery) error { return b.Write(ctx, d.MessageId) })
	e.run(t, p, dial(t, e.url))
	eventually(t, 5*time.Second, "both copies to be settled", func() bool { return c.processed.Load()+c.duplicate.Load() == 2 })
	if b.Effects(t, "ev-1") != 1 || c.duplicate.Load() != 1 {
		t.Errorf("ev-1 committed %d times, %d duplicates; want 1, 1", b.Effects(t, "ev-1"), c.duplicate.Load())
	}
}

func TestNewChecksConfig(t *testing.T) {
	st := idemrt.NewMemoryStore()
	h := func(ctx context.Context, d amqp.Delivery) error { return nil }
	for name, cfg := range map[string]Config{
		"no store":       {Consumer: "c", Queue: "q"},
		"no consumer":    {Store: st, Queue: "q"},
		"no queue":       {Store: st, Consumer: "c"},
		"bad pointer":    {Store: st, Consumer: "c", Queue: "q", ID: BodyID("id")},
		"negative max":   {Store: st, Consumer: "c", Queue: "q", MaxDeliveries: -1},
		"sub-ms delay":   {Store: st, Consumer: "c", Queue: "q", RetryDelays: []time.Duration{time.Microsecond}},
		"negative fetch": {Store: st, Consumer: "c", Queue: "q", Prefetch: -1},
	} {
		if _, err := New(cfg, h); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	p, err := New(Config{Store: st, Consumer: "c", Queue: "orders"}, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{p.RetryQueue(p.retryDelay(1)), p.RetryQueue(p.retryDelay(2)), p.RetryQueue(p.retryDelay(9)), p.DeadLetterQueue()}; fmt.Sprint(got) != "[orders.retry.1s orders.retry.10s orders.retry.1m0s orders.dead]" {
		t.Errorf("queue names %v", got)
	}
}

// On a quorum queue the deliveries a crash cost (x-delivery-count) count
// toward MaxDeliveries: a message whose handler crashed its consumer twice
// is dead-lettered by its first handler error on the third delivery.
func TestQuorumDeliveryCountCountsCrashes(t *testing.T) {
	b := msgtest.Memory()
	e := newEnv(t)
	e.Queue += ".quorum"
	e.declare(t, e.Queue, amqp.Table{"x-queue-type": "quorum"})
	var calls atomic.Int64
	var c counts
	var conn *amqp.Connection
	p := e.processor(t, Config{Store: b.Store, Consumer: "ledger", MaxDeliveries: 3, RetryDelays: []time.Duration{time.Hour}, Hooks: c.hooks()},
		func(ctx context.Context, d amqp.Delivery) error {
			if calls.Add(1) <= 2 {
				conn.Close() // the process dies mid-handler: nothing commits, nothing is acked
			}
			return errors.New("boom")
		})
	e.publish(t, amqp.Publishing{MessageId: "m1", Body: []byte(`{}`)})
	for i := 1; i <= 2; i++ {
		conn = dial(t, e.url)
		if err := p.Consume(context.Background(), conn); err == nil {
			t.Fatalf("crash %d: Consume returned nil", i)
		}
	}
	e.run(t, p, dial(t, e.url))
	eventually(t, 10*time.Second, "the dead letter", func() bool { return c.dead.Load() == 1 })
	// The two simulated crashes return an error after closing the
	// connection, so they are reported as retries whose copy could not be
	// published (and Consume returns at once instead of waiting out the
	// hour-long retry delay before a requeue it cannot send).
	if calls.Load() != 3 || c.retried.Load() != 2 {
		t.Errorf("handler ran %d times (want 3), %d retries reported (want 2)", calls.Load(), c.retried.Load())
	}
	if n := e.count(t, p.DeadLetterQueue()); n != 1 {
		t.Errorf("dead-letter queue holds %d messages", n)
	}
}
