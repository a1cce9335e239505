package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
)

// consumers is how many goroutines apply messages at once in
// BenchmarkConsume (the pool has 24 connections).
const consumers = 16

// BenchmarkConsume applies messages as a ledger consumer does (one INSERT
// per message in a transaction), 16 at once: bare, through ProcessOnce
// (the processed id inserted in the same transaction), and ProcessOnce on
// redeliveries of processed ids (the insert finds the id; nothing else
// runs). It reports msgs/s; the ratio dedup/bare is what issue 22 bounds:
//
//	go test ./internal/stores/postgres -run '^$' -bench Consume -benchtime 5000x -count 3
func BenchmarkConsume(b *testing.B) {
	db := newTestDB(b)
	st := db.store(b)
	ctx := context.Background()
	if _, err := st.pool.Exec(ctx, "CREATE TABLE ledger (message_id text PRIMARY KEY, amount bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	var run atomic.Int64
	const insert = "INSERT INTO ledger (message_id, amount) VALUES ($1, 100)"
	bare := func(id string) error {
		return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insert, id)
			return err
		})
	}
	dedup := func(id string) error {
		ran, err := idemrt.ProcessOnce(ctx, st, "ledger", id, func(ctx context.Context) error {
			tx, _ := TxFromContext(ctx)
			_, err := tx.Exec(ctx, insert, id)
			return err
		})
		if err == nil && !ran {
			err = fmt.Errorf("%s: not run", id)
		}
		return err
	}
	for _, bc := range []struct {
		name  string
		apply func(id string) error
	}{
		{"bare", bare},
		{"dedup", dedup},
		{"bare-again", bare},
		{"dedup-again", dedup},
	} {
		b.Run(bc.name, func(b *testing.B) {
			prefix := fmt.Sprintf("%s-%d-", bc.name, run.Add(1))
			consume(b, func(i int) error { return bc.apply(fmt.Sprintf("%s%d", prefix, i)) })
		})
	}
	b.Run("redelivery", func(b *testing.B) {
		prefix := fmt.Sprintf("redelivery-%d-", run.Add(1))
		for i := range b.N {
			if err := dedup(fmt.Sprintf("%s%d", prefix, i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		consume(b, func(i int) error {
			ran, err := idemrt.ProcessOnce(ctx, st, "ledger", fmt.Sprintf("%s%d", prefix, i), func(context.Context) error { return nil })
			if ran {
				return fmt.Errorf("redelivery %d ran", i)
			}
			return err
		})
	})
}

// consume runs apply(0..b.N-1) on consumers goroutines and reports msgs/s.
func consume(b *testing.B, apply func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	start := time.Now()
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := apply(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// discard is a Publisher that accepts every event at once.
type discard struct{ n atomic.Int64 }

func (d *discard) Publish(context.Context, idemrt.OutboxEvent) error { d.n.Add(1); return nil }

// BenchmarkRelay publishes b.N events from the outbox table to an
// in-memory Publisher, with one relay and with four on the same table,
// batches of 100; it reports events/s (the table's cost: claim, mark
// sent, no broker):
//
//	go test ./internal/stores/postgres -run '^$' -bench Relay -benchtime 20000x -count 3
func BenchmarkRelay(b *testing.B) {
	db := newTestDB(b)
	st := db.store(b)
	ctx := context.Background()
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			b.StopTimer()
			for i := 0; i < b.N; i += 100 {
				var evs []idemrt.OutboxEvent
				for j := i; j < min(i+100, b.N); j++ {
					evs = append(evs, idemrt.OutboxEvent{Topic: "charge.created", Key: fmt.Sprintf("ch_%d", j%1000), Payload: []byte(`{"amount":100}`)})
				}
				if err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error { return AddEvents(ctx, tx, evs...) }); err != nil {
					b.Fatal(err)
				}
			}
			pub := &discard{}
			b.StartTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range relays {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := &idemrt.Relay{Store: st, Publisher: pub, Batch: 100}
					for pub.n.Load() < int64(b.N) {
						if _, err := r.RunOnce(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.StopTimer()
			if _, err := st.SweepSent(ctx, 0, 1<<30); err != nil {
				b.Fatal(err)
			}
		})
	}
}
