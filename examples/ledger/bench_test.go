package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/ledger/internal/ledgerstore"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkRelay measures the relay of this example (idemrt.Relay over the
// generated PostgreSQL store, publishing through natsidem or amqpidem) on a
// real broker, in two phases of one run:
//
//   - throughput: 5,000 events already committed in the outbox, relayed
//     with the default batch (100); events/s from the first claim to the
//     last event marked sent;
//   - latency: a producer commits one event per transaction, 50 a second
//     for 8 s (below either broker's relay throughput, so that no backlog
//     builds), while the relay runs with its default interval (200 ms), and
//     again with -poll 10 ms; the added latency of an event is the time
//     from its commit returning to its publish being acknowledged by the
//     broker (both on the benchmark's clock); p50 and p99.
//
// It is a benchmark so that go test never times it by default:
//
//	flock /tmp/idemgen-bench.lock go test ./examples/ledger -run '^$' -bench Relay -benchtime 1x
func BenchmarkRelay(b *testing.B) {
	for _, broker := range []struct{ kind, env string }{{"nats", "IDEMGEN_TEST_NATS"}, {"amqp", "IDEMGEN_TEST_AMQP"}} {
		b.Run(broker.kind, func(b *testing.B) {
			url := os.Getenv(broker.env)
			if url == "" {
				b.Skipf("%s not set", broker.env)
			}
			benchRelay(b, broker.kind, url)
		})
	}
}

func benchRelay(b *testing.B, kind, url string) {
	ctx := context.Background()
	dsn := freshDatabase(b, testutil.PostgresDSN(b), "ledger_bench_")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := ledgerstore.ApplySchema(ctx, pool); err != nil {
		b.Fatal(err)
	}
	store, err := ledgerstore.NewStore(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	run := "bench" + randHex(4)
	bc := brokerConfig{kind: kind, url: url, prefix: run + ".payments.", stream: "LEDGER_" + run,
		exchange: "ledger-" + run, queue: "ledger-" + run}
	b.Cleanup(func() { dropBrokerNames(b, kind, url, run) })
	pub, closePub, err := publisher(ctx, &bc, idemrt.DefaultRelayLease, slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	defer closePub()
	load1 := loadAverage()
	b.ResetTimer()
	for range b.N {
		// Throughput.
		const n = 5000
		fill(b, pool, n)
		published := 0
		r := &idemrt.Relay{Store: store, Publisher: prefixed{pub, bc.prefix}, Retention: -1,
			Hooks: idemrt.RelayHooks{Published: func(context.Context, idemrt.OutboxEvent, time.Duration) { published++ }}}
		start := time.Now()
		for published < n {
			if _, err := r.RunOnce(ctx); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")

		// Latency, at the default interval and at 10 ms.
		for _, interval := range []time.Duration{idemrt.DefaultRelayInterval, 10 * time.Millisecond} {
			p50, p99, count := latency(b, pool, store, prefixed{pub, bc.prefix}, interval)
			unit := "ms-interval" + strconv.Itoa(int(interval.Milliseconds()))
			b.ReportMetric(p50, "p50-"+unit)
			b.ReportMetric(p99, "p99-"+unit)
			b.Logf("%s: interval %v: %d events, commit to publish p50 %.1f ms, p99 %.1f ms", kind, interval, count, p50, p99)
		}
	}
	b.StopTimer()
	b.ReportMetric(load1, "load1-start")
	b.ReportMetric(loadAverage(), "load1-end")
}

// fill commits n events, 500 per transaction.
func fill(b *testing.B, pool *pgxpool.Pool, n int) {
	ctx := context.Background()
	payload := []byte(`{"account":"acct_bench","id":"ch_0123456789abcdef01234567","object":"charge","amount":2000,"currency":"usd","customer":"cus_42","amount_refunded":0,"created":"2026-12-02T06:00:00.000000Z"}`)
	for i := 0; i < n; i += 500 {
		evs := make([]idemrt.OutboxEvent, 0, 500)
		for j := i; j < min(i+500, n); j++ {
			evs = append(evs, idemrt.OutboxEvent{ID: "fill:" + randHex(8), Topic: topicChargeCreated, Key: "ch_" + strconv.Itoa(j), Payload: payload})
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ledgerstore.AddEvents(ctx, tx, evs...) }); err != nil {
			b.Fatal(err)
		}
	}
}

// latency runs a relay while a producer commits 50 events a second for 8
// s, and returns the p50 and p99 of commit-to-acknowledgement in ms.
func latency(b *testing.B, pool *pgxpool.Pool, store idemrt.OutboxStore, pub idemrt.Publisher, interval time.Duration) (p50, p99 float64, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	committed, acked := map[string]time.Time{}, map[string]time.Time{}
	relayDone := make(chan struct{})
	r := &idemrt.Relay{Store: store, Publisher: pub, Interval: interval, Retention: -1,
		Hooks: idemrt.RelayHooks{Published: func(_ context.Context, ev idemrt.OutboxEvent, _ time.Duration) {
			now := time.Now()
			mu.Lock()
			acked[ev.ID] = now
			mu.Unlock()
		}}}
	go func() { r.Run(ctx); close(relayDone) }()
	payload := []byte(`{"account":"acct_bench","amount":2000,"currency":"usd"}`)
	tick := time.NewTicker(20 * time.Millisecond)
	const total = 400
	for i := range total {
		<-tick.C
		id := fmt.Sprintf("lat-%d-%s", interval.Milliseconds(), randHex(8))
		ev := idemrt.OutboxEvent{ID: id, Topic: topicChargeCreated, Key: id, Payload: payload}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ledgerstore.AddEvents(ctx, tx, ev) }); err != nil {
			b.Fatalf("event %d: %v", i, err)
		}
		now := time.Now()
		mu.Lock()
		committed[id] = now
		mu.Unlock()
	}
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		done := len(acked)
		mu.Unlock()
		if done >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-relayDone
	mu.Lock()
	defer mu.Unlock()
	lat := make([]float64, 0, total)
	for id, c := range committed {
		a, ok := acked[id]
		if !ok {
			b.Fatalf("event %s was not published within 30 s", id)
		}
		lat = append(lat, float64(a.Sub(c).Microseconds())/1000)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], len(lat)
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}
