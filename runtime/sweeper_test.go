package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

type sweepSpy struct {
	idemrt.Store
	mu     sync.Mutex
	limits []int
	fail   bool
}

func (s *sweepSpy) Sweep(ctx context.Context, limit int) (int, error) {
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return 0, errors.New("sweep failed")
	}
	return s.Store.Sweep(ctx, limit)
}

func TestRunSweeperDeletesExpiredInBatches(t *testing.T) {
	ms := idemrt.NewMemoryStore()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	ms.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 25; i++ {
		k := idemrt.RecordKey{Scope: "s", Key: string(rune('a' + i))}
		res, _ := ms.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Second, TTL: time.Minute})
		_ = ms.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, Response: &idemrt.SavedResponse{Status: 200}, TTL: time.Minute})
	}
	live := idemrt.RecordKey{Scope: "s", Key: "live"}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	_, _ = ms.Claim(ctx, idemrt.ClaimRequest{RecordKey: live, Lease: time.Second, TTL: time.Hour})

	spy := &sweepSpy{Store: ms}
	var deleted []int
	var dmu sync.Mutex
	done := make(chan error)
	go func() {
		done <- idemrt.RunSweeper(ctx, spy, time.Hour, 10, idemrt.SweepHook(func(_ context.Context, n int, err error) {
			dmu.Lock()
			deleted = append(deleted, n)
			dmu.Unlock()
		}))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for ms.Len() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunSweeper returned %v after cancel, want nil", err)
	}
	if ms.Len() != 1 {
		t.Fatalf("%d records left, want only the live one", ms.Len())
	}
	dmu.Lock()
	defer dmu.Unlock()
	if len(deleted) < 3 || deleted[0] != 10 || deleted[1] != 10 || deleted[2] != 5 {
		t.Fatalf("batches %v, want 10, 10, 5", deleted)
	}
}

func TestRunSweeperSurvivesErrorsAndValidates(t *testing.T) {
	if err := idemrt.RunSweeper(context.Background(), nil, time.Second, 1); err == nil {
		t.Error("nil store accepted")
	}
	if err := idemrt.RunSweeper(context.Background(), idemrt.NewMemoryStore(), 0, 1); err == nil {
		t.Error("zero interval accepted")
	}
	spy := &sweepSpy{Store: idemrt.NewMemoryStore(), fail: true}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := idemrt.RunSweeper(ctx, spy, 10*time.Millisecond, 5); err != nil {
		t.Fatalf("RunSweeper: %v", err)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.limits) < 3 {
		t.Fatalf("sweeper stopped after a failure: %d calls", len(spy.limits))
	}
}
