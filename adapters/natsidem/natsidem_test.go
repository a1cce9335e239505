package natsidem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/adapters/internal/delivery"
	"github.com/idemgen/idemgen/adapters/internal/msgtest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// env is one test's streams on the NATS server of IDEMGEN_TEST_NATS: the
// consumed stream (subject In) with a durable consumer, and a dead-letter
// stream (subject Dead). All are deleted at the end of the test.
type env struct {
	url      string
	nc       *nats.Conn
	js       jetstream.JetStream
	In, Dead string
	stream   jetstream.Stream
	dead     jetstream.Stream
	consumer jetstream.Consumer
}

func connect(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(3*time.Second))
	if err != nil {
		t.Fatalf("IDEMGEN_TEST_NATS=%s does not answer: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func newEnv(t *testing.T, ackWait time.Duration) *env {
	t.Helper()
	e := &env{url: msgtest.NATSURL(t)}
	e.nc, e.js = connect(t, e.url)
	sfx := msgtest.Suffix()
	e.In, e.Dead = "idemgen."+sfx+".in", "idemgen."+sfx+".dead"
	ctx := context.Background()
	var err error
	e.stream, err = e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "IDEMGEN_" + sfx, Subjects: []string{e.In}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	e.dead, err = e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "IDEMGEN_" + sfx + "_DEAD", Subjects: []string{e.Dead}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		e.js.DeleteStream(context.Background(), "IDEMGEN_"+sfx)
		e.js.DeleteStream(context.Background(), "IDEMGEN_"+sfx+"_DEAD")
	})
	e.consumer, err = e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "ledger", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return e
}

// publish stores a message on In with the given headers.
func (e *env) publish(t *testing.T, body string, headers ...string) {
	t.Helper()
	m := nats.NewMsg(e.In)
	m.Data = []byte(body)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// settled waits until the consumer has nothing pending or unacknowledged.
func (e *env) settled(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "the consumer to have no pending or unacknowledged message", func() bool {
		info, err := e.consumer.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	})
}

// run consumes with p until the test ends.
func (e *env) run(t *testing.T, p *Processor, c jetstream.Consumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Consume(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Consume: %v", err)
		}
	})
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

// counts counts the hooks' events.
type counts struct {
	processed, duplicate, retried, dead, refused atomic.Int64
	mu                                           sync.Mutex
	events                                       []Event
}

func (c *counts) hooks() Hooks {
	rec := func(n *atomic.Int64) func(context.Context, Event) {
		return func(_ context.Context, ev Event) {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
			n.Add(1)
		}
	}
	return Hooks{Processed: rec(&c.processed), Duplicate: rec(&c.duplicate), Retried: rec(&c.retried),
		DeadLettered: rec(&c.dead), Refused: rec(&c.refused)}
}

// Three processors on one durable consumer, every id published twice
// (with distinct Nats-Msg-Ids, so the stream keeps both): each id's effect
// commits once, the duplicates are acked without running.
func TestOnceUnderDuplicatesAndConcurrency(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t, 5*time.Second)
		var runs atomic.Int64
		var c counts
		for range 3 {
			p, err := New(Config{Store: b.Store, Consumer: "ledger", ID: HeaderID("Event-Id"), Hooks: c.hooks()},
				func(ctx context.Context, msg jetstream.Msg) error {
					runs.Add(1)
					return b.Write(ctx, msg.Headers().Get("Event-Id"))
				})
			if err != nil {
				t.Fatal(err)
			}
			e.run(t, p, e.consumer)
		}
		const n = 30
		for i := range n {
			for range 2 {
				e.publish(t, fmt.Sprintf(`{"n":%d}`, i), "Event-Id", fmt.Sprintf("ev-%d", i))
			}
		}
		eventually(t, 20*time.Second, "every delivery to be settled", func() bool {
			return c.processed.Load()+c.duplicate.Load() >= 2*n
		})
		e.settled(t)
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
	})
}

// The consumer crashes after its commit and before its ack (its connection
// closes): the server redelivers after AckWait, another consumer process
// acks it as a duplicate, and the handler ran once.
func TestCrashBetweenCommitAndAck(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t, time.Second)
		var runs atomic.Int64
		h := func(ctx context.Context, msg jetstream.Msg) error {
			runs.Add(1)
			return b.Write(ctx, "m1")
		}
		// The first process: its own connection, closed between the commit
		// and the ack.
		nc1, js1 := connect(t, e.url)
		c1, err := js1.Consumer(context.Background(), e.stream.CachedInfo().Config.Name, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		var first counts
		p1, err := New(Config{Store: b.Store, Consumer: "ledger", Hooks: first.hooks()}, h)
		if err != nil {
			t.Fatal(err)
		}
		committed := make(chan struct{})
		p1.afterCommit = func(r delivery.Result) {
			if r.Ran {
				nc1.Close()
				close(committed)
			}
		}
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		go p1.Consume(ctx1, c1)
		e.publish(t, `{"amount":1}`, jetstream.MsgIDHeader, "m1")
		select {
		case <-committed:
		case <-time.After(10 * time.Second):
			t.Fatal("the first process did not commit")
		}
		cancel1()
		// The restarted process.
		var second counts
		p2, err := New(Config{Store: b.Store, Consumer: "ledger", Hooks: second.hooks()}, h)
		if err != nil {
			t.Fatal(err)
		}
		e.run(t, p2, e.consumer)
		eventually(t, 10*time.Second, "the redelivery to be acked as a duplicate", func() bool { return second.duplicate.Load() == 1 })
		e.settled(t)
		if runs.Load() != 1 || b.Effects(t, "m1") != 1 || second.processed.Load() != 0 {
			t.Errorf("handler ran %d times, %d effects, %d processed after the restart; want 1, 1, 0",
				runs.Load(), b.Effects(t, "m1"), second.processed.Load())
		}
	})
}

// A failing handler is redelivered with NakWithDelay after each failure,
// and dead-lettered (published to the dead-letter subject, terminated) on
// delivery MaxDeliveries; nothing of it commits. A handler that fails once
// succeeds on its redelivery.
func TestRetryBackoffThenDeadLetter(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t, 10*time.Second)
		var mu sync.Mutex
		calls := map[string][]time.Time{}
		var c counts
		p, err := New(Config{
			Store: b.Store, Consumer: "ledger", MaxDeliveries: 3,
			Backoff:           func(n int) time.Duration { return time.Duration(n) * 150 * time.Millisecond },
			DeadLetterSubject: e.Dead, DeadLetterPublisher: e.js, Hooks: c.hooks(),
		}, func(ctx context.Context, msg jetstream.Msg) error {
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			mu.Lock()
			calls[id] = append(calls[id], time.Now())
			n := len(calls[id])
			mu.Unlock()
			if err := b.Write(ctx, id); err != nil {
				return err
			}
			if id == "poison" || n == 1 {
				return fmt.Errorf("boom %d", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		e.run(t, p, e.consumer)
		e.publish(t, `{"bad":true}`, jetstream.MsgIDHeader, "poison", "Trace", "t-1")
		e.publish(t, `{"ok":true}`, jetstream.MsgIDHeader, "flaky")
		eventually(t, 10*time.Second, "the poison message to be dead-lettered", func() bool { return c.dead.Load() == 1 })
		eventually(t, 10*time.Second, "the flaky message to be processed", func() bool { return c.processed.Load() == 1 })
		e.settled(t)
		mu.Lock()
		poison, flaky := calls["poison"], calls["flaky"]
		mu.Unlock()
		if len(poison) != 3 || len(flaky) != 2 {
			t.Fatalf("poison ran %d times (want 3), flaky %d (want 2)", len(poison), len(flaky))
		}
		for i := 1; i < len(poison); i++ {
			if gap, want := poison[i].Sub(poison[i-1]), time.Duration(i)*150*time.Millisecond; gap < want {
				t.Errorf("delivery %d came %v after delivery %d, before its backoff %v", i+1, gap, i, want)
			}
		}
		if got := c.retried.Load(); got != 3 {
			t.Errorf("%d retries reported, want 3 (two of poison, one of flaky)", got)
		}
		if b.Effects(t, "poison") != 0 || b.Effects(t, "flaky") != 1 {
			t.Errorf("effects: poison %d (want 0), flaky %d (want 1)", b.Effects(t, "poison"), b.Effects(t, "flaky"))
		}
		dl := deadLetters(t, e)
		if len(dl) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dl))
		}
		m := dl[0]
		want := map[string]string{HeaderDeadReason: "failed", HeaderDeadSubject: e.In, HeaderDeadDelivery: "3", "Trace": "t-1",
			HeaderDeadStream: e.stream.CachedInfo().Config.Name, HeaderDeadSequence: "1"}
		for k, v := range want {
			if got := m.Header.Get(k); got != v {
				t.Errorf("dead letter header %s = %q, want %q", k, got, v)
			}
		}
		if !strings.Contains(m.Header.Get(HeaderDeadError), "boom 3") || string(m.Data) != `{"bad":true}` {
			t.Errorf("dead letter error %q, body %q", m.Header.Get(HeaderDeadError), m.Data)
		}
	})
}

func deadLetters(t *testing.T, e *env) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	info, err := e.dead.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := e.dead.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// A message without an id where the source looks is refused loudly: not
// processed, reported, dead-lettered and terminated.
func TestRefusesMessagesWithoutID(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t, 10*time.Second)
		var runs atomic.Int64
		var c counts
		for _, src := range []IDSource{MsgID(), BodyID("/id")} {
			p, err := New(Config{Store: b.Store, Consumer: "ledger", ID: src, DeadLetterSubject: e.Dead, DeadLetterPublisher: e.js, Hooks: c.hooks()},
				func(ctx context.Context, msg jetstream.Msg) error { runs.Add(1); return b.Write(ctx, "x") })
			if err != nil {
				t.Fatal(err)
			}
			e.run(t, p, e.consumer)
		}
		// Each message lacks the id of one source or both; each processor
		// sees some of them, so publish messages that lack both.
		e.publish(t, `{"no":"id"}`)
		e.publish(t, `not json`)
		e.publish(t, `{"id":""}`)
		eventually(t, 10*time.Second, "three refusals", func() bool { return c.refused.Load() == 3 })
		e.settled(t)
		if runs.Load() != 0 || b.Total(t) != 0 {
			t.Errorf("handler ran %d times for messages without an id", runs.Load())
		}
		dl := deadLetters(t, e)
		if len(dl) != 3 {
			t.Fatalf("%d dead letters, want 3", len(dl))
		}
		for _, m := range dl {
			if m.Header.Get(HeaderDeadReason) != "refused" || !strings.Contains(m.Header.Get(HeaderDeadError), delivery.ErrNoID.Error()) {
				t.Errorf("dead letter headers %v", m.Header)
			}
		}
	})
}

// Without a dead-letter subject, a refused message is still never
// processed: it is terminated (the server will not redeliver it).
func TestRefusedWithoutDeadLetterSubjectIsTerminated(t *testing.T) {
	e := newEnv(t, time.Second)
	var c counts
	b := msgtest.Memory()
	p, err := New(Config{Store: b.Store, Consumer: "ledger", Hooks: c.hooks()},
		func(ctx context.Context, msg jetstream.Msg) error { t.Error("handler ran"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, p, e.consumer)
	e.publish(t, `{}`)
	eventually(t, 5*time.Second, "the refusal", func() bool { return c.refused.Load() == 1 })
	time.Sleep(1500 * time.Millisecond) // past AckWait: a message that was not terminated comes back
	e.settled(t)
	if c.refused.Load() != 1 {
		t.Errorf("refused %d times, want once", c.refused.Load())
	}
}

// The Publisher sets Nats-Msg-Id to the event's id and waits for the
// PubAck; a re-publish (a relay that crashed before marking the event
// sent) is dropped by the stream's duplicate window and reported as
// success; a consumer then processes the event once.
func TestPublisher(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	pub := NewPublisher(e.js)
	ev := idemrt.OutboxEvent{ID: "ev-1", Topic: e.In, Key: "ch_1", Payload: []byte(`{"amount":5}`), Headers: map[string]string{"Type": "charge.created"}}
	ctx := context.Background()
	for range 2 {
		if err := pub.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	info, err := e.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after publishing one event twice, want 1", info.State.Msgs)
	}
	m, err := e.stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(jetstream.MsgIDHeader) != "ev-1" || m.Header.Get("Type") != "charge.created" || m.Header.Get(HeaderEventKey) != "ch_1" || string(m.Data) != `{"amount":5}` {
		t.Errorf("stored message: headers %v, body %q", m.Header, m.Data)
	}
	if err := pub.Publish(ctx, idemrt.OutboxEvent{ID: "ev-2", Topic: "idemgen.nostream." + msgtest.Suffix()}); err == nil {
		t.Error("publishing to a subject no stream stores succeeded; want an error (no PubAck)")
	}
	if err := pub.Publish(ctx, idemrt.OutboxEvent{Topic: e.In}); err == nil {
		t.Error("publishing an event without an id succeeded")
	}
	b := msgtest.Memory()
	var c counts
	p, err := New(Config{Store: b.Store, Consumer: "ledger", Hooks: c.hooks()}, func(ctx context.Context, msg jetstream.Msg) error {
		return b.Write(ctx, msg.Headers().Get(jetstream.MsgIDHeader))
	})
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, p, e.consumer)
	eventually(t, 5*time.Second, "the event to be processed", func() bool { return c.processed.Load() == 1 })
	e.settled(t)
	if b.Effects(t, "ev-1") != 1 {
		t.Errorf("event processed %d times", b.Effects(t, "ev-1"))
	}
}

// Consume refuses a consumer whose MaxDeliver would stop redeliveries
// before the dead letter, and one without explicit acks.
func TestConsumeChecksConsumerConfig(t *testing.T) {
	e := newEnv(t, time.Second)
	ctx := context.Background()
	p, err := New(Config{Store: msgtest.Memory().Store, Consumer: "ledger", MaxDeliveries: 5},
		func(ctx context.Context, msg jetstream.Msg) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	low, err := e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "low", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Consume(ctx, low); err == nil || !strings.Contains(err.Error(), "MaxDeliver 3") {
		t.Errorf("Consume with MaxDeliver 3 < MaxDeliveries 5: %v", err)
	}
	none, err := e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Consume(ctx, none); err == nil || !strings.Contains(err.Error(), "AckExplicitPolicy") {
		t.Errorf("Consume with AckNone: %v", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	st := idemrt.NewMemoryStore()
	h := func(ctx context.Context, msg jetstream.Msg) error { return nil }
	for name, cfg := range map[string]Config{
		"no store":           {Consumer: "c"},
		"no consumer":        {Store: st},
		"long consumer":      {Store: st, Consumer: strings.Repeat("c", 256)},
		"bad pointer":        {Store: st, Consumer: "c", ID: BodyID("id")},
		"empty header":       {Store: st, Consumer: "c", ID: HeaderID("")},
		"negative max":       {Store: st, Consumer: "c", MaxDeliveries: -1},
		"dead, no publisher": {Store: st, Consumer: "c", DeadLetterSubject: "x.dead"},
	} {
		if _, err := New(cfg, h); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(Config{Store: st, Consumer: "c"}, nil); err == nil {
		t.Error("New accepted a nil handler")
	}
}

// Two different messages whose body ids are strings that encoding/json
// decodes to the same text (invalid UTF-8, lone surrogate escapes: each
// becomes U+FFFD) must not share an id: the second would be acked as a
// duplicate of the first and never handled. They are refused instead.
func TestBodyIDsThatDecodeAlikeAreRefused(t *testing.T) {
	msgtest.Each(t, func(t *testing.T, b *msgtest.Backend) {
		e := newEnv(t, 10*time.Second)
		var c counts
		p, err := New(Config{Store: b.Store, Consumer: "ledger", ID: BodyID("/id"), DeadLetterSubject: e.Dead, DeadLetterPublisher: e.js, Hooks: c.hooks()},
			func(ctx context.Context, msg jetstream.Msg) error { return b.Write(ctx, "x") })
		if err != nil {
			t.Fatal(err)
		}
		e.run(t, p, e.consumer)
		bodies := []string{"{\"id\":\"a\xff\"}", "{\"id\":\"a\xfe\"}", `{"id":"a\ud800"}`, `{"id":"a\udbff"}`, `{"id":"\udc00\ud800"}`}
		for _, body := range bodies {
			e.publish(t, body)
		}
		e.publish(t, `{"id":"a\ud83d\ude00"}`) // a valid pair: handled
		eventually(t, 10*time.Second, "every message settled", func() bool {
			return c.refused.Load()+c.processed.Load()+c.duplicate.Load() == int64(len(bodies)+1)
		})
		e.settled(t)
		if c.duplicate.Load() != 0 {
			t.Errorf("%d different messages were acked as duplicates of another: never handled", c.duplicate.Load())
		}
		if c.refused.Load() != int64(len(bodies)) || c.processed.Load() != 1 {
			t.Errorf("refused %d, processed %d; want %d refused (ambiguous ids) and 1 processed", c.refused.Load(), c.processed.Load(), len(bodies))
		}
	})
}

// A stream whose duplicate window is shorter than the relay's re-publish
// horizon stores a re-published event twice, silently: CheckStreams
// refuses it (and a subject no stream stores) before the relay starts.
func TestCheckStreams(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	ctx := context.Background()
	short := "idemgen." + msgtest.Suffix() + ".short"
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "IDEMGEN_SHORT_" + msgtest.Suffix(), Subjects: []string{short},
		Storage: jetstream.MemoryStorage, Duplicates: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if name, err := e.js.StreamNameBySubject(context.Background(), short); err == nil {
			e.js.DeleteStream(context.Background(), name)
		}
	})
	pub := NewPublisher(e.js)
	ev := idemrt.OutboxEvent{ID: "ev-1", Topic: short}
	if err := pub.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // a relay's lease ending after a crash
	if err := pub.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	name, _ := e.js.StreamNameBySubject(ctx, short)
	s, _ := e.js.Stream(ctx, name)
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream: %v, %v; want the event stored twice past the window (what CheckStreams guards against)", info, err)
	}
	lease := idemrt.DefaultRelayLease
	if err := CheckStreams(ctx, e.js, lease, e.In); err != nil {
		t.Errorf("CheckStreams on a stream with the default window (2m): %v", err)
	}
	err := CheckStreams(ctx, e.js, lease, short)
	if err == nil || !strings.Contains(err.Error(), "Duplicates") {
		t.Errorf("CheckStreams on a 500ms window against a %v lease = %v; want an error naming Duplicates", lease, err)
	}
	if err := CheckStreams(ctx, e.js, lease, "idemgen.nostream."+msgtest.Suffix()); err == nil {
		t.Error("CheckStreams on a subject no stream stores = nil; want an error")
	}
}

// A DeadLetterSubject that no stream stores can never take a dead letter:
// a failing message would be nak'd and retried for ever instead. Consume
// refuses it at start-up.
func TestConsumeChecksDeadLetterSubject(t *testing.T) {
	e := newEnv(t, time.Second)
	p, err := New(Config{Store: msgtest.Memory().Store, Consumer: "ledger", DeadLetterSubject: "idemgen.nostream." + msgtest.Suffix(), DeadLetterPublisher: e.js},
		func(ctx context.Context, msg jetstream.Msg) error { return errors.New("poison") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Consume(ctx, e.consumer); err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "DeadLetterSubject") {
		t.Errorf("Consume with a DeadLetterSubject no stream stores = %v; want an error naming it", err)
	}
	ok, err := New(Config{Store: msgtest.Memory().Store, Consumer: "ledger", DeadLetterSubject: e.Dead, DeadLetterPublisher: e.js},
		func(ctx context.Context, msg jetstream.Msg) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := ok.Consume(ctx2, e.consumer); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Consume with a stored DeadLetterSubject = %v; want it to run until its context ends", err)
	}
}
