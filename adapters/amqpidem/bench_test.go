package amqpidem

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/adapters/internal/msgtest"
)

// BenchmarkConsumerDedup compares, on PostgreSQL and a durable queue of
// persistent messages, the Processor (the handler's insert and
// MarkProcessed in one transaction, ack after the commit) with the bare
// consumer: the same consume loop (prefetch 16, one delivery at a time)
// doing the same insert in its own transaction, then Ack. Run with
// -benchtime 1x:
//
//	cd adapters/amqpidem && go test -run '^$' -bench ConsumerDedup -benchtime 1x
func BenchmarkConsumerDedup(b *testing.B) {
	const rounds, n = 5, 2000
	url := msgtest.AMQPURL(b)
	pg := msgtest.Postgres(b)
	conn, err := amqp.Dial(url)
	if err != nil {
		b.Fatalf("IDEMGEN_TEST_AMQP=%s does not answer: %v", url, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range b.N {
		msgtest.Compare(b, rounds, n, func(b *testing.B, r int, dedup bool) time.Duration {
			queue := "idemgen.bench." + msgtest.Suffix()
			if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			defer ch.QueueDelete(queue, false, false, false)
			for i := range n {
				if err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{
					MessageId: fmt.Sprintf("%s-%d", queue, i), DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprintf(`{"n":%d}`, i)),
				}); err != nil {
					b.Fatal(err)
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				if q.Messages == n {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("queue holds %d of %d messages", q.Messages, n)
				}
				time.Sleep(10 * time.Millisecond)
			}
			var done atomic.Int64
			finished := make(chan struct{})
			count := func() {
				if done.Add(1) == n {
					close(finished)
				}
			}
			rctx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			start := time.Now()
			if dedup {
				p, err := New(Config{Store: pg.Store, Consumer: "bench", Queue: queue, Prefetch: 16,
					Hooks: Hooks{Processed: func(context.Context, Event) { count() }}},
					func(ctx context.Context, d amqp.Delivery) error { return pg.Write(ctx, d.MessageId) })
				if err != nil {
					b.Fatal(err)
				}
				go func() { defer close(stopped); p.Consume(rctx, conn) }()
			} else {
				cch, err := conn.Channel()
				if err != nil {
					b.Fatal(err)
				}
				if err := cch.Qos(16, 0, false); err != nil {
					b.Fatal(err)
				}
				deliveries, err := cch.Consume(queue, "", false, false, false, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer close(stopped)
					defer cch.Close()
					for {
						select {
						case <-rctx.Done():
							return
						case d := <-deliveries:
							if err := pg.BareWrite(rctx, d.MessageId); err != nil {
								d.Nack(false, true)
								continue
							}
							if d.Ack(false) == nil {
								count()
							}
						}
					}
				}()
			}
			select {
			case <-finished:
			case <-time.After(5 * time.Minute):
				b.Fatalf("round timed out with %d of %d messages", done.Load(), n)
			}
			el := time.Since(start)
			cancel()
			<-stopped
			return el
		})
	}
}
