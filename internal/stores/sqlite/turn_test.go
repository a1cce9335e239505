package sqlite

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestSharedStoreStormTransactional: 200 goroutines share one store (one
// database handle, as a service has it) and send 20 new keys, 10 times
// each, to a transactional operation, so that the store's transactional
// attempts queue for its write turn. Each key's handler runs once and
// leaves one effect row; every other request gets 409 or, in wait mode,
// the replay. The requests retry a 503 (nothing ran: on a loaded machine
// the queue can outlast the store bound), as the contract asks of clients;
// a store error that no 503 answered fails the test.
func TestSharedStoreStormTransactional(t *testing.T) {
	db := newTestDB(t)
	conn := db.open(t)
	conn.SetMaxOpenConns(harness.Clients)
	conn.SetMaxIdleConns(harness.Clients)
	b, err := newBackend(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 30 * time.Second} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			const goroutines, keys = 200, 20
			var storeErrs sync.Map
			var runs [keys]atomic.Int64
			keyOf := func(i int) string { return fmt.Sprintf("shared-storm-%v-%d-%d", wait, time.Now().UnixNano()/1e6, i) }
			names := make([]string, keys)
			index := map[string]int{}
			for i := range names {
				names[i] = keyOf(i)
				index[names[i]] = i
			}
			h, err := idemrt.Wrap(idemrt.Options{Store: b.Store, Hooks: idemrt.Hooks{
				StoreError: func(_ context.Context, e idemrt.Event) { storeErrs.Store(e.Err.Error(), true) },
			}}, &idemrt.Policy{
				OperationID: "createCharge", Method: http.MethodPost, Route: "/charges",
				Principal: idemrt.PrincipalAnonymous, Lease: harness.StormLease, TTL: time.Hour,
				Transactional: true, Wait: wait,
			}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("Idempotency-Key")
				runs[index[id]].Add(1)
				if err := b.Effect(r.Context(), id, "storm"); err != nil {
					http.Error(w, "effect: "+err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}))
			if err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			codes := make([]int, goroutines)
			firsts := make([]bool, goroutines)
			var unavailable atomic.Int64
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					<-start
					w, n503 := harness.DoRetrying(h, names[i%keys], 90*time.Second)
					unavailable.Add(int64(n503))
					codes[i] = w.Code
					firsts[i] = w.Code == http.StatusCreated && w.Header().Get("Idempotent-Replayed") != "true"
				})
			}
			close(start)
			wg.Wait()
			counts := map[int]int{}
			firstsOf := make([]int, keys)
			for i, c := range codes {
				counts[c]++
				if firsts[i] {
					firstsOf[i%keys]++
				}
			}
			t.Logf("%d requests: statuses %v, %d answers of 503 retried", goroutines, counts, unavailable.Load())
			storeErrs.Range(func(k, _ any) bool {
				if unavailable.Load() == 0 {
					t.Errorf("store error: %v", k)
				} else {
					t.Logf("store error (answered 503, retried): %v", k)
				}
				return true
			})
			if counts[http.StatusCreated]+counts[http.StatusConflict] != goroutines {
				t.Errorf("statuses %v: want only 201 and 409", counts)
			}
			if wait > 0 && counts[http.StatusCreated] != goroutines {
				t.Errorf("statuses %v in wait mode: want every request 201", counts)
			}
			for i, name := range names {
				if wait > 0 && firstsOf[i] != 1 {
					t.Errorf("key %d: %d first (non-replayed) 201s, want 1", i, firstsOf[i])
				}
				if got := runs[i].Load(); got > 1 || int(got) != firstsOf[i] {
					t.Errorf("key %d: handler ran %d times with %d first 201s, want at most once and one each", i, got, firstsOf[i])
				}
				// Once more, after the storm: a replay, or the first run of
				// a key whose every request was told 409.
				if w, _ := harness.DoRetrying(h, name, 90*time.Second); w.Code != http.StatusCreated {
					t.Errorf("key %d after the storm: status %d", i, w.Code)
				}
				if got := runs[i].Load(); got != 1 {
					t.Errorf("key %d: handler ran %d times, want 1", i, got)
				}
				n, err := b.Effects(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					t.Errorf("key %d: %d effect rows, want 1", i, n)
				}
			}
		})
	}
}

// TestTurnEndsWithLease: a transactional attempt whose handler hangs holds
// the store's write turn no longer than its lease (the context BeginClaim
// got): another key's attempt, waiting for the turn, then proceeds, and the
// hung attempt's claim is gone with its rolled-back transaction.
func TestTurnEndsWithLease(t *testing.T) {
	db := newTestDB(t)
	st := db.store(t)
	req := func(key string) idemrt.ClaimRequest {
		return idemrt.ClaimRequest{
			RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: key},
			Lease:     time.Minute, TTL: time.Hour, FingerprintVersion: 1,
		}
	}
	hung, other := harness.UniqueKey(t, "hung"), harness.UniqueKey(t, "other")
	// The hung attempt's lease: the runtime gives BeginClaim a context that
	// ends with it.
	leaseCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	tx1, res, err := st.BeginClaim(leaseCtx, req(hung))
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("hung attempt: %+v, %v", res, err)
	}
	// Never committed nor rolled back. The other key's attempt waits for
	// the turn for less than busy_timeout (10 s in the test DSN), so that
	// a turn held past the lease makes it give up: InProgress.
	ctx, cancel2 := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel2()
	tx2, res, err := st.BeginClaim(ctx, req(other))
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("other key's attempt while the hung one's lease is over: %+v, %v; want Acquired", res, err)
	}
	if err := tx2.Complete(ctx, idemrt.Completion{RecordKey: req(other).RecordKey, Epoch: res.Epoch, TTL: time.Hour,
		Response: &idemrt.SavedResponse{Status: http.StatusCreated}}); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(context.Background()); err == nil {
		t.Error("the hung attempt committed after its lease")
	}
	tx3, res, err := st.BeginClaim(ctx, req(hung))
	if err != nil || res.State != idemrt.Acquired || res.TakenOver {
		t.Fatalf("the hung key after its lease: %+v, %v; want Acquired afresh", res, err)
	}
	if err := tx3.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The turn is free again: a rolled-back attempt gave it back.
	tx4, res, err := st.BeginClaim(ctx, req(hung))
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("after a rollback: %+v, %v", res, err)
	}
	if err := tx4.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}
