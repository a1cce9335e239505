package natsidem

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/adapters/internal/msgtest"
)

// BenchmarkConsumerDedup compares, on PostgreSQL and a file-backed stream,
// the Processor (the handler's insert and MarkProcessed in one
// transaction, ack after the commit) with the bare consumer: the same
// Consume loop doing the same insert in its own transaction, then Ack.
// One message at a time, as Consume delivers them. Run with -benchtime 1x:
//
//	cd adapters/natsidem && go test -run '^$' -bench ConsumerDedup -benchtime 1x
func BenchmarkConsumerDedup(b *testing.B) {
	const rounds, n = 5, 2000
	url := msgtest.NATSURL(b)
	pg := msgtest.Postgres(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatalf("IDEMGEN_TEST_NATS=%s does not answer: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range b.N {
		msgtest.Compare(b, rounds, n, func(b *testing.B, r int, dedup bool) time.Duration {
			sfx := msgtest.Suffix()
			name, subj := "IDEMGEN_BENCH_"+sfx, "idemgen.bench."+sfx
			stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage})
			if err != nil {
				b.Fatal(err)
			}
			defer js.DeleteStream(ctx, name)
			for i := range n {
				if _, err := js.PublishAsync(subj, []byte(fmt.Sprintf(`{"n":%d}`, i)), jetstream.WithMsgID(fmt.Sprintf("%s-%d", sfx, i))); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				b.Fatal("publishing timed out")
			}
			c, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			var done atomic.Int64
			finished := make(chan struct{})
			count := func() {
				if done.Add(1) == n {
					close(finished)
				}
			}
			var handler jetstream.MessageHandler
			if dedup {
				p, err := New(Config{Store: pg.Store, Consumer: "bench"}, func(ctx context.Context, msg jetstream.Msg) error {
					return pg.Write(ctx, msg.Headers().Get(jetstream.MsgIDHeader))
				})
				if err != nil {
					b.Fatal(err)
				}
				handler = func(msg jetstream.Msg) {
					if p.Handle(ctx, msg) == Ack {
						count()
					}
				}
			} else {
				handler = func(msg jetstream.Msg) {
					if err := pg.BareWrite(ctx, msg.Headers().Get(jetstream.MsgIDHeader)); err != nil {
						msg.NakWithDelay(time.Second)
						return
					}
					if msg.Ack() == nil {
						count()
					}
				}
			}
			start := time.Now()
			cc, err := c.Consume(handler)
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-finished:
			case <-time.After(5 * time.Minute):
				b.Fatalf("round timed out with %d of %d messages", done.Load(), n)
			}
			el := time.Since(start)
			cc.Stop()
			<-cc.Closed()
			return el
		})
	}
}
