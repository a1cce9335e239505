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

// TestNewKeysStormHasNoFalseConflicts: brand-new keys, each sent once, to a
// transactional operation, with a store bound (100 ms) shorter than the
// queue of other keys' attempts they meet. A claim that waited out the
// bound behind other keys' attempts used to be told InProgress: 409
// in-progress for a key nobody held. It must get 503 store-unavailable
// (nothing ran, retry) instead, and a key that is in progress in this
// process still gets 409, with the attempt's remaining lease as
// Retry-After.
//
// The queue is made by an attempt whose handler blocks until the test
// releases it, so that every new key sent meanwhile waits out the bound
// however loaded the machine is (a queue of short handlers is as long as
// the machine is slow: on a loaded 2-core machine a 100 ms bound also
// ended before the first new key's own claim). Then a storm of new keys
// behind 10 ms handlers, where which ones wait out the bound depends on
// the load: none may be told 409. Every key is then retried through a
// patient wrapper (a 9 s bound) and must run once.
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
	blocker := "blocker-" + t.Name()
	blocked, unblock := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Idempotency-Key")
		if err := b.Effect(r.Context(), id, "storm"); err != nil {
			http.Error(w, "effect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if id == blocker {
			close(blocked)
			<-unblock
		} else {
			time.Sleep(10 * time.Millisecond) // 48 attempts in a row take 0.5 s or more
		}
		w.WriteHeader(http.StatusCreated)
	})
	wrap := func(bound time.Duration) http.Handler {
		h, err := idemrt.Wrap(idemrt.Options{Store: b.Store, StoreTimeout: bound}, &idemrt.Policy{
			OperationID: "createCharge", Method: http.MethodPost, Route: "/charges",
			Principal: idemrt.PrincipalAnonymous, Lease: 10 * time.Second, TTL: time.Hour, Transactional: true,
		}, handler)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	short, patient := wrap(100*time.Millisecond), wrap(9*time.Second)
	storm := func(base string) []int {
		codes := make([]int, goroutines)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range goroutines {
			wg.Go(func() {
				<-start
				codes[i] = harness.Do(short, base+strconv.Itoa(i)).Code
			})
		}
		close(start)
		wg.Wait()
		return codes
	}
	// retried sends every key again through the patient wrapper: each runs
	// once in all.
	retried := func(base string, codes []int) {
		for i, c := range codes {
			key := base + strconv.Itoa(i)
			if c == http.StatusServiceUnavailable {
				if w := harness.Do(patient, key); w.Code != http.StatusCreated {
					t.Errorf("key %s after a 503: status %d", key, w.Code)
				}
			}
			if n, err := b.Effects(context.Background(), key); err != nil || n != 1 {
				t.Errorf("key %s: %d effects (%v), want 1", key, n, err)
			}
		}
	}

	// Behind an attempt that holds the write turn: every new key waits
	// out the bound and gets 503; a duplicate of the attempt gets 409.
	done := make(chan int)
	go func() { done <- harness.Do(patient, blocker).Code }()
	<-blocked
	base := fmt.Sprintf("queued-%d-", time.Now().UnixNano())
	codes := storm(base)
	dup := harness.Do(patient, blocker) // told at once: its key is held
	close(unblock)
	counts := map[int]int{}
	for _, c := range codes {
		counts[c]++
	}
	t.Logf("%d brand-new keys behind a running attempt: statuses %v", goroutines, counts)
	if counts[http.StatusServiceUnavailable] != goroutines {
		t.Errorf("statuses %v behind a running attempt of another key: want %d x 503 (%d answered 409 in-progress)", counts, goroutines, counts[http.StatusConflict])
	}
	if dup.Code != http.StatusConflict {
		t.Errorf("duplicate of a running attempt: status %d, want 409", dup.Code)
	}
	if ra, _ := strconv.Atoi(dup.Header().Get("Retry-After")); ra < 1 || ra > 10 {
		t.Errorf("duplicate of a running attempt: Retry-After %q, want the lease left (at most 10)", dup.Header().Get("Retry-After"))
	}
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("blocking attempt: %d", code)
	}
	retried(base, codes)

	// Brand-new keys queueing behind each other's short attempts.
	base = fmt.Sprintf("new-%d-", time.Now().UnixNano())
	codes = storm(base)
	counts = map[int]int{}
	for _, c := range codes {
		counts[c]++
	}
	t.Logf("%d brand-new keys at once: statuses %v", goroutines, counts)
	if counts[http.StatusCreated]+counts[http.StatusServiceUnavailable] != goroutines {
		t.Errorf("statuses %v: want 201, and 503 for claims that waited out the bound (%d answered 409 in-progress)", counts, counts[http.StatusConflict])
	}
	retried(base, codes)
}
