package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

type pubFunc func(ctx context.Context, ev idemrt.OutboxEvent) error

func (f pubFunc) Publish(ctx context.Context, ev idemrt.OutboxEvent) error { return f(ctx, ev) }

func addEvents(t testing.TB, st *idemrt.MemoryStore, evs ...idemrt.OutboxEvent) {
	t.Helper()
	ran, err := idemrt.ProcessOnce(context.Background(), st, "producer", idemrt.NewEventID(), func(ctx context.Context) error {
		return idemrt.AddEvents(ctx, st, evs...)
	})
	if !ran || err != nil {
		t.Fatal(ran, err)
	}
}

func TestRelayRefusesBadConfig(t *testing.T) {
	st := idemrt.NewMemoryStore()
	pub := pubFunc(func(context.Context, idemrt.OutboxEvent) error { return nil })
	for name, r := range map[string]*idemrt.Relay{
		"no store":       {Publisher: pub},
		"no publisher":   {Store: st},
		"negative batch": {Store: st, Publisher: pub, Batch: -1},
		"negative lease": {Store: st, Publisher: pub, Lease: -time.Second},
	} {
		if err := r.Run(context.Background()); err == nil {
			t.Errorf("%s: Run accepted the relay", name)
		}
	}
}

// A failing publish releases the rest of the batch and backs off; the
// hooks see every publish, failure and sweep; Run stops with its context.
func TestRelayHooksBackoffAndSweep(t *testing.T) {
	st := idemrt.NewMemoryStore()
	addEvents(t, st, idemrt.OutboxEvent{ID: "a", Topic: "t", Key: "K"}, idemrt.OutboxEvent{ID: "b", Topic: "t", Key: "K"}, idemrt.OutboxEvent{ID: "c", Topic: "t", Key: "K"})
	var (
		mu        sync.Mutex
		published []string
		failures  int
		failedAt  []time.Time
		swept     int
		latencies []time.Duration
	)
	// The first event fails twice: its rounds publish nothing and back off.
	failB := 2
	pub := pubFunc(func(ctx context.Context, ev idemrt.OutboxEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if ev.ID == "a" && failB > 0 {
			failB--
			failedAt = append(failedAt, time.Now())
			return errors.New("no ack")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	r := &idemrt.Relay{
		Store: st, Publisher: pub, Interval: 5 * time.Millisecond,
		MinBackoff: 40 * time.Millisecond, MaxBackoff: time.Second,
		Retention: time.Nanosecond, SweepEvery: 10 * time.Millisecond,
		Hooks: idemrt.RelayHooks{
			Published: func(_ context.Context, ev idemrt.OutboxEvent, latency time.Duration) {
				mu.Lock()
				published = append(published, ev.ID)
				latencies = append(latencies, latency)
				mu.Unlock()
			},
			PublishFailed: func(context.Context, idemrt.OutboxEvent, error) { mu.Lock(); failures++; mu.Unlock() },
			Swept:         func(_ context.Context, n int) { mu.Lock(); swept += n; mu.Unlock() },
		},
	}
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		ok := swept == 3
		mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after its context ended, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := len(published); got != 3 || published[0] != "a" || published[1] != "b" || published[2] != "c" {
		t.Fatalf("published %v, want [a b c] (in order, a once)", published)
	}
	if failures != 2 || swept != 3 {
		t.Fatalf("failures %d, swept %d; want 2 and 3", failures, swept)
	}
	// The second failure came after at least the doubled backoff.
	if gap := failedAt[1].Sub(failedAt[0]); gap < 40*time.Millisecond {
		t.Errorf("retry after %v, want the backoff (>= 40ms)", gap)
	}
	for _, l := range latencies {
		if l < 0 || l > 10*time.Second {
			t.Errorf("latency %v", l)
		}
	}
	if total, unsent := st.OutboxLen(); total != 0 || unsent != 0 {
		t.Errorf("outbox holds %d events (%d unsent) after the sweep", total, unsent)
	}
}

// A relay stopped in the middle of a batch marks what it published and
// releases the rest: nothing is published twice after a clean stop.
func TestRelayStopMidBatch(t *testing.T) {
	st := idemrt.NewMemoryStore()
	addEvents(t, st, idemrt.OutboxEvent{ID: "a", Topic: "t"}, idemrt.OutboxEvent{ID: "b", Topic: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	pub := pubFunc(func(ctx context.Context, ev idemrt.OutboxEvent) error {
		got = append(got, ev.ID)
		cancel() // the process is told to stop after the first publish
		return nil
	})
	r := &idemrt.Relay{Store: st, Publisher: pub}
	if _, err := r.RunOnce(ctx); err == nil {
		t.Fatal("RunOnce after its context ended reported success")
	}
	pub2 := pubFunc(func(ctx context.Context, ev idemrt.OutboxEvent) error { got = append(got, ev.ID); return nil })
	if n, err := (&idemrt.Relay{Store: st, Publisher: pub2}).RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("next relay: RunOnce = %d, %v; want 1, nil", n, err)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("published %v, want [a b]", got)
	}
}

// BenchmarkRelayMemory: the relay's own cost per event (claim, publish to
// a Publisher that accepts at once, mark sent) on a MemoryStore, batches
// of 100.
func BenchmarkRelayMemory(b *testing.B) {
	st := idemrt.NewMemoryStore()
	evs := make([]idemrt.OutboxEvent, b.N)
	for i := range evs {
		evs[i] = idemrt.OutboxEvent{Topic: "charge.created", Key: "ch", Payload: []byte(`{"amount":100}`)}
	}
	addEvents(b, st, evs...)
	var n int
	r := &idemrt.Relay{Store: st, Publisher: pubFunc(func(context.Context, idemrt.OutboxEvent) error { n++; return nil })}
	b.ResetTimer()
	for n < b.N {
		if _, err := r.RunOnce(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
