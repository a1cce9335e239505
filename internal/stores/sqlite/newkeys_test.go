package sqlite

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestNewKeysStormHasNoFalseConflicts: goroutines send brand-new keys,
// each once, to a transactional operation whose handler holds the write
// turn for a few milliseconds, with a store bound shorter than the queue
// they make. A claim that waited out the bound behind other keys'
// attempts used to be told InProgress: 409 in-progress for a key nobody
// held. It must get 503 store-unavailable (nothing ran, retry) instead,
// and a key that is in progress in this process still gets 409, with the
// attempt's remaining lease as Retry-After.
func TestNewKeysStormHasNoFalseConflicts(t *testing.T) {
	db := newTestDB(t)
	conn := db.open(t)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	b, err := newBackend(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines = 48
	hold := 10 * time.Millisecond // 48 attempts in a row take about 0.5 s
	slow, release := make(chan struct{}), make(chan struct{})
	h, err := idemrt.Wrap(idemrt.Options{Store: b.Store, StoreTimeout: 100 * time.Millisecond}, &idemrt.Policy{
		OperationID: "createCharge", Method: http.MethodPost, Route: "/charges",
		Principal: idemrt.PrincipalAnonymous, Lease: 10 * time.Second, TTL: time.Hour, Transactional: true,
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Idempotency-Key")
		if err := b.Effect(r.Context(), id, "storm"); err != nil {
			http.Error(w, "effect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if id == "slow-"+t.Name() {
			close(slow)
			<-release
		} else {
			time.Sleep(hold)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("new-%d-", time.Now().UnixNano())
	codes := make([]int, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			<-start
			codes[i] = harness.Do(h, base+strconv.Itoa(i)).Code
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, c := range codes {
		counts[c]++
	}
	t.Logf("%d brand-new keys at once: statuses %v", goroutines, counts)
	if counts[http.StatusConflict] > 0 {
		t.Errorf("statuses %v: %d brand-new keys answered 409 in-progress", counts, counts[http.StatusConflict])
	}
	if counts[http.StatusCreated]+counts[http.StatusServiceUnavailable] != goroutines || counts[http.StatusCreated] == 0 {
		t.Errorf("statuses %v: want 201, and 503 for claims that waited out the bound", counts)
	}
	// Every key that got 503 runs on its retry, once.
	for i, c := range codes {
		if c == http.StatusServiceUnavailable {
			if w := harness.Do(h, base+strconv.Itoa(i)); w.Code != http.StatusCreated {
				t.Errorf("key %d after a 503: status %d", i, w.Code)
			}
		}
		if n, err := b.Effects(context.Background(), base+strconv.Itoa(i)); err != nil || n != 1 {
			t.Errorf("key %d: %d effects (%v), want 1", i, n, err)
		}
	}

	// A real duplicate: 409 at once, with the lease left as Retry-After.
	done := make(chan int)
	go func() { done <- harness.Do(h, "slow-"+t.Name()).Code }()
	<-slow
	w := harness.Do(h, "slow-"+t.Name())
	close(release)
	if w.Code != http.StatusConflict {
		t.Fatalf("duplicate of a running attempt: status %d, want 409", w.Code)
	}
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra < 9 || ra > 10 {
		t.Errorf("duplicate of a running attempt: Retry-After %q, want the lease left (9 or 10)", w.Header().Get("Retry-After"))
	}
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("slow attempt: %d", code)
	}
}
