package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// MessagingStore is what RunMessaging tests: a store that deduplicates
// message deliveries and holds an outbox.
type MessagingStore interface {
	idemrt.MessageStore
	idemrt.OutboxWriter
	idemrt.OutboxStore
}

// RunMessaging runs the messaging conformance suite: ProcessOnce over the
// store's MarkProcessed (exactly one committed run per message id under
// concurrent deliveries, a rollback leaves the id unprocessed) and the
// outbox (events commit with the transaction, claims lease them in order
// per key, several claimers lose and duplicate nothing, sweeping). The
// business write of every handler is an outbox event, so the suite needs
// no table of its own. newStore is called once per subtest and must
// return a store whose outbox holds no events (a fresh database or table):
// the subtests count every event in it. Since no two share a store, the
// subtests run in parallel, after the calling test function returns.
func RunMessaging(t *testing.T, newStore func(t *testing.T) MessagingStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, MessagingStore)
	}{
		{"ProcessOnce", processOnce},
		{"ProcessOnceRollback", processOnceRollback},
		{"ProcessOnceConcurrent", processOnceConcurrent},
		{"MarkTwiceInOneTx", markTwiceInOneTx},
		{"OutboxRoundTrip", outboxRoundTrip},
		{"OutboxRejects", outboxRejects},
		{"OutboxOrderPerKey", outboxOrderPerKey},
		{"OutboxLeaseEnds", outboxLeaseEnds},
		{"OutboxConcurrentClaimers", outboxConcurrentClaimers},
		{"OutboxSweep", outboxSweep},
		{"RelaysOnOneTable", relaysOnOneTable},
		{"RelayCrashRepublishes", relayCrashRepublishes},
		{"RelayPublishesWithinTheLease", relayPublishesWithinTheLease},
		{"RelayLateReleaseKeepsAnotherLease", relayLateReleaseKeepsAnotherLease},
		{"RelayPoisonEventHoldsOnlyItsKey", relayPoisonEventHoldsOnlyItsKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func msgCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// addOne is the business write of a handler: one event keyed by the
// message id.
func addOne(st MessagingStore, messageID string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return idemrt.AddEvents(ctx, st, idemrt.OutboxEvent{Topic: "test.processed", Key: messageID, Payload: []byte(messageID)})
	}
}

// drain claims every unsent event (with a long lease) and marks it sent.
func drain(t *testing.T, ctx context.Context, st MessagingStore) []idemrt.OutboxEvent {
	t.Helper()
	var all []idemrt.OutboxEvent
	for {
		evs, err := st.ClaimEvents(ctx, 100, time.Minute)
		if err != nil {
			t.Fatalf("ClaimEvents: %v", err)
		}
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		if err := st.MarkSent(ctx, ids(evs)); err != nil {
			t.Fatalf("MarkSent: %v", err)
		}
	}
}

func ids(evs []idemrt.OutboxEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func processOnce(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	id := newRunID(t) + "-m"
	runs := 0
	fn := func(ctx context.Context) error {
		runs++
		if _, ok := idemrt.TxFromContext(ctx); !ok {
			t.Error("fn's context carries no transaction")
		}
		return addOne(st, id)(ctx)
	}
	for i, want := range []bool{true, false, false} {
		ran, err := idemrt.ProcessOnce(ctx, st, "consumer-a", id, fn)
		if err != nil || ran != want {
			t.Fatalf("delivery %d: ProcessOnce = %v, %v; want %v, nil", i+1, ran, err, want)
		}
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
	// Another consumer of the same message processes it on its own.
	if ran, err := idemrt.ProcessOnce(ctx, st, "consumer-b", id, addOne(st, id)); err != nil || !ran {
		t.Fatalf("consumer-b: ProcessOnce = %v, %v; want true, nil", ran, err)
	}
	if got := len(drain(t, ctx, st)); got != 2 {
		t.Fatalf("the outbox holds %d events, want 2 (one per consumer)", got)
	}
}

func processOnceRollback(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	id := newRunID(t) + "-m"
	boom := errors.New("handler failed")
	ran, err := idemrt.ProcessOnce(ctx, st, "c", id, func(ctx context.Context) error {
		if err := addOne(st, id)(ctx); err != nil {
			return err
		}
		return boom
	})
	if ran || !errors.Is(err, boom) {
		t.Fatalf("failing fn: ProcessOnce = %v, %v; want false, %v", ran, err, boom)
	}
	if evs := drain(t, ctx, st); len(evs) != 0 {
		t.Fatalf("a rolled-back handler left %d events", len(evs))
	}
	func() {
		defer func() {
			if r := recover(); r != "handler panicked" {
				t.Fatalf("recovered %v, want the handler's panic", r)
			}
		}()
		_, _ = idemrt.ProcessOnce(ctx, st, "c", id, func(ctx context.Context) error {
			if err := addOne(st, id)(ctx); err != nil {
				return err
			}
			panic("handler panicked")
		})
	}()
	if evs := drain(t, ctx, st); len(evs) != 0 {
		t.Fatalf("a panicking handler left %d events", len(evs))
	}
	// The id is still unprocessed: the next delivery runs.
	if ran, err := idemrt.ProcessOnce(ctx, st, "c", id, addOne(st, id)); err != nil || !ran {
		t.Fatalf("redelivery after the rollback: ProcessOnce = %v, %v; want true, nil", ran, err)
	}
	if evs := drain(t, ctx, st); len(evs) != 1 {
		t.Fatalf("the outbox holds %d events, want 1", len(evs))
	}
}

// processOnceConcurrent delivers each of a few ids from many goroutines
// at once. The first delivery of each id that gets to run fails, so some
// deliveries wait on a transaction that rolls back. Each id's fn commits
// exactly once, which the outbox (one event per committed run) confirms.
func processOnceConcurrent(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	const nIDs, perID = 8, 16
	run := newRunID(t)
	var committed [nIDs]atomic.Int32
	var failed [nIDs]atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, nIDs*perID)
	start := make(chan struct{})
	for g := range perID {
		for i := range nIDs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				id := fmt.Sprintf("%s-%d", run, i)
				ran, err := idemrt.ProcessOnce(ctx, st, "c", id, func(ctx context.Context) error {
					if err := addOne(st, id)(ctx); err != nil {
						return err
					}
					// A handler takes a moment, so deliveries overlap.
					time.Sleep(2 * time.Millisecond)
					if !failed[i].Swap(true) {
						return errFirstRun
					}
					return nil
				})
				if err != nil && !errors.Is(err, errFirstRun) {
					errs <- fmt.Errorf("delivery %d of %s: %w", g, id, err)
				}
				if ran {
					committed[i].Add(1)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	perKey := make(map[string]int)
	for _, ev := range drain(t, ctx, st) {
		perKey[ev.Key]++
	}
	for i := range nIDs {
		id := fmt.Sprintf("%s-%d", run, i)
		if n := committed[i].Load(); n != 1 {
			t.Errorf("%s: %d deliveries committed, want exactly 1", id, n)
		}
		if perKey[id] != 1 {
			t.Errorf("%s: %d events committed, want exactly 1", id, perKey[id])
		}
	}
	if len(perKey) != nIDs {
		t.Errorf("events for %d keys, want %d", len(perKey), nIDs)
	}
}

var errFirstRun = errors.New("the first run fails")

func markTwiceInOneTx(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	id := newRunID(t) + "-m"
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	for i, want := range []bool{true, false} {
		first, err := st.MarkProcessed(ctx, tx, "c", id)
		if err != nil || first != want {
			t.Fatalf("mark %d in one transaction = %v, %v; want %v, nil", i+1, first, err, want)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ran, err := idemrt.ProcessOnce(ctx, st, "c", id, addOne(st, id)); err != nil || ran {
		t.Fatalf("after the commit: ProcessOnce = %v, %v; want false, nil", ran, err)
	}
}

// inTx adds events in one committed transaction.
func inTx(t *testing.T, ctx context.Context, st MessagingStore, evs ...idemrt.OutboxEvent) {
	t.Helper()
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddEvents(ctx, tx, evs...); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("AddEvents: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func outboxRoundTrip(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	before := time.Now()
	want := []idemrt.OutboxEvent{
		{ID: newRunID(t) + "-1", Topic: "charge.created", Key: "ch_1", Payload: []byte{0, 1, 2, 0xff, '\''}, Headers: map[string]string{"Content-Type": "application/json", "X-Trace": "abc"}},
		{Topic: "refund.created", Payload: nil},
	}
	inTx(t, ctx, st, want...)
	got := drain(t, ctx, st)
	if len(got) != 2 {
		t.Fatalf("claimed %d events, want 2", len(got))
	}
	if got[0].ID != want[0].ID || got[0].Topic != want[0].Topic || got[0].Key != want[0].Key ||
		!bytes.Equal(got[0].Payload, want[0].Payload) || !maps.Equal(got[0].Headers, want[0].Headers) {
		t.Errorf("event read back as %+v, want %+v", got[0], want[0])
	}
	if len(got[1].ID) != 32 || got[1].Topic != "refund.created" || got[1].Key != "" || len(got[1].Payload) != 0 || len(got[1].Headers) != 0 {
		t.Errorf("event with defaults read back as %+v (want a 32-digit id)", got[1])
	}
	for _, ev := range got {
		if d := ev.CreatedAt.Sub(before); d < -5*time.Second || d > time.Minute {
			t.Errorf("CreatedAt %v is not the time of the write (%v)", ev.CreatedAt, before)
		}
	}
	// An event added in a transaction that rolls back never exists.
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddEvents(ctx, tx, idemrt.OutboxEvent{Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := drain(t, ctx, st); len(evs) != 0 {
		t.Fatalf("a rolled-back event was claimed: %+v", evs)
	}
}

func outboxRejects(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	long := string(bytes.Repeat([]byte("x"), idemrt.MaxEventField+1))
	for name, ev := range map[string]idemrt.OutboxEvent{
		"no topic":    {ID: "a"},
		"long id":     {ID: long, Topic: "t"},
		"long key":    {Topic: "t", Key: long},
		"long header": {Topic: "t", Headers: map[string]string{long: "v"}},
	} {
		tx, err := st.BeginTx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AddEvents(ctx, tx, ev); err == nil {
			t.Errorf("%s: AddEvents accepted %+v", name, ev)
		}
		_ = tx.Rollback(ctx)
	}
	if err := idemrt.AddEvents(ctx, st, idemrt.OutboxEvent{Topic: "t"}); err == nil {
		t.Error("AddEvents with no transaction in the context succeeded")
	}
	// A second event with a used id is refused (by the commit at the
	// latest), and nothing of its transaction is kept.
	id := newRunID(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: id, Topic: "t"})
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = st.AddEvents(ctx, tx, idemrt.OutboxEvent{Topic: "t", Key: "other"}, idemrt.OutboxEvent{ID: id, Topic: "t"})
	if err == nil {
		err = tx.Commit(ctx)
	} else {
		_ = tx.Rollback(ctx)
	}
	if err == nil {
		t.Error("a second event with a used id was committed")
	}
	if evs := drain(t, ctx, st); len(evs) != 1 || evs[0].ID != id {
		t.Errorf("outbox after the refused duplicate: %+v, want only %s", evs, id)
	}
}

func outboxOrderPerKey(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	ev := func(id, key string) idemrt.OutboxEvent { return idemrt.OutboxEvent{ID: id, Topic: "t", Key: key} }
	inTx(t, ctx, st, ev("a1", "A"))
	inTx(t, ctx, st, ev("b1", "B"), ev("a2", "A"))
	inTx(t, ctx, st, ev("b2", "B"))
	claim := func(limit int, want ...string) []idemrt.OutboxEvent {
		t.Helper()
		evs, err := st.ClaimEvents(ctx, limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(evs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ClaimEvents(%d) = %v, want %v", limit, got, want)
		}
		return evs
	}
	claim(1, "a1")
	// a2 waits while a1 is leased and unsent; B goes on in order.
	claim(10, "b1", "b2")
	claim(10)
	if err := st.ReleaseEvents(ctx, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkSent(ctx, []string{"a1"}); err != nil {
		t.Fatal(err)
	}
	claim(10, "b1", "a2", "b2")
	if err := st.MarkSent(ctx, []string{"b1", "a2", "b2", "a2", "no-such-id"}); err != nil {
		t.Fatalf("MarkSent of sent and unknown ids: %v", err)
	}
	claim(10)
	// Events without a key have no order: a leased one holds up no other.
	inTx(t, ctx, st, ev("n1", ""), ev("n2", ""))
	claim(1, "n1")
	claim(10, "n2")
}

func outboxLeaseEnds(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "e1", Topic: "t", Key: "K"}, idemrt.OutboxEvent{ID: "e2", Topic: "t", Key: "K"})
	evs, err := st.ClaimEvents(ctx, 10, shortLease)
	if err != nil || len(evs) != 2 {
		t.Fatalf("ClaimEvents = %v, %v; want both events", ids(evs), err)
	}
	// The claimer "crashed": once the lease ends, the events come back
	// (a relay publishes them again, with the same ids).
	time.Sleep(pastLease)
	if again := drain(t, ctx, st); fmt.Sprint(ids(again)) != "[e1 e2]" {
		t.Fatalf("after the lease ended, claimed %v, want [e1 e2]", ids(again))
	}
}

// outboxConcurrentClaimers runs several claimers on one outbox while
// events are added: every event is claimed exactly once (the leases are
// long), and each key's events are published in the order they were
// added.
func outboxConcurrentClaimers(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	const nEvents, nKeys, claimers = 300, 7, 4
	var (
		mu        sync.Mutex
		published = make(map[string][]int) // key -> event numbers, in publish order
		seen      = make(map[string]int)
	)
	for i := 0; i < nEvents; i += 10 {
		var evs []idemrt.OutboxEvent
		for j := i; j < i+10; j++ {
			evs = append(evs, idemrt.OutboxEvent{ID: fmt.Sprintf("ev-%04d", j), Topic: "t", Key: fmt.Sprintf("k%d", j%nKeys)})
		}
		inTx(t, ctx, st, evs...)
	}
	var total atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total.Load() < nEvents {
				evs, err := st.ClaimEvents(ctx, 8, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, ev := range evs {
					n, _ := strconv.Atoi(strings.TrimPrefix(ev.ID, "ev-"))
					published[ev.Key] = append(published[ev.Key], n)
					seen[ev.ID]++
				}
				mu.Unlock()
				if err := st.MarkSent(ctx, ids(evs)); err != nil {
					errs <- err
					return
				}
				total.Add(int32(len(evs)))
				if len(evs) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != nEvents {
		t.Errorf("%d distinct events claimed, want %d", len(seen), nEvents)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s claimed %d times", id, n)
		}
	}
	for key, ns := range published {
		for i := 1; i < len(ns); i++ {
			if ns[i] < ns[i-1] {
				t.Errorf("key %s published out of order: %v", key, ns)
				break
			}
		}
	}
}

func outboxSweep(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "s1", Topic: "t"}, idemrt.OutboxEvent{ID: "s2", Topic: "t"}, idemrt.OutboxEvent{ID: "s3", Topic: "t"})
	evs, err := st.ClaimEvents(ctx, 2, time.Minute)
	if err != nil || len(evs) != 2 {
		t.Fatalf("ClaimEvents = %v, %v", ids(evs), err)
	}
	if err := st.MarkSent(ctx, ids(evs)); err != nil {
		t.Fatal(err)
	}
	if n, err := st.SweepSent(ctx, time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("SweepSent within the retention = %d, %v; want 0", n, err)
	}
	time.Sleep(pastLease)
	if n, err := st.SweepSent(ctx, shortLease, 1); err != nil || n != 1 {
		t.Fatalf("SweepSent(limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := st.SweepSent(ctx, shortLease, 10); err != nil || n != 1 {
		t.Fatalf("SweepSent = %d, %v; want the other sent event", n, err)
	}
	// The unsent event stays, however old.
	if n, err := st.SweepSent(ctx, 0, 10); err != nil || n != 0 {
		t.Fatalf("SweepSent of unsent events = %d, %v; want 0", n, err)
	}
	if left := drain(t, ctx, st); fmt.Sprint(ids(left)) != "[s3]" {
		t.Fatalf("left after sweeping: %v, want [s3]", ids(left))
	}
}

// recorder is a Publisher that keeps what it published.
type recorder struct {
	mu    sync.Mutex
	byID  map[string]int
	order map[string][]string // key -> ids, in publish order
	fail  func(ev idemrt.OutboxEvent) error
}

func newRecorder() *recorder {
	return &recorder{byID: make(map[string]int), order: make(map[string][]string)}
}

func (r *recorder) Publish(ctx context.Context, ev idemrt.OutboxEvent) error {
	if r.fail != nil {
		if err := r.fail(ev); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[ev.ID]++
	r.order[ev.Key] = append(r.order[ev.Key], ev.ID)
	return nil
}

func (r *recorder) published() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// relaysOnOneTable runs several relays on one outbox while handlers add
// events, some of the publishes failing: every event is published, none
// twice (no relay crashed), each key's in order.
func relaysOnOneTable(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	const nEvents, nKeys, relays = 400, 9, 4
	rec := newRecorder()
	var calls atomic.Int32
	rec.fail = func(idemrt.OutboxEvent) error {
		if calls.Add(1)%37 == 0 {
			return errors.New("broker unavailable")
		}
		return nil
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &idemrt.Relay{Store: st, Publisher: rec, Batch: 16, Lease: time.Minute, Interval: 5 * time.Millisecond,
				MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Retention: -1}
			if err := r.Run(rctx); err != nil {
				t.Error(err)
			}
		}()
	}
	for i := 0; i < nEvents; i += 8 {
		var evs []idemrt.OutboxEvent
		for j := i; j < i+8; j++ {
			evs = append(evs, idemrt.OutboxEvent{ID: fmt.Sprintf("ev-%04d", j), Topic: "t", Key: fmt.Sprintf("k%d", j%nKeys)})
		}
		inTx(t, ctx, st, evs...)
	}
	deadline := time.Now().Add(30 * time.Second)
	for rec.published() < nEvents && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if got := rec.published(); got != nEvents {
		t.Fatalf("%d of %d events published", got, nEvents)
	}
	for id, n := range rec.byID {
		if n != 1 {
			t.Errorf("%s published %d times", id, n)
		}
	}
	for key, evIDs := range rec.order {
		for i := 1; i < len(evIDs); i++ {
			if evIDs[i] < evIDs[i-1] {
				t.Errorf("key %s published out of order: %v", key, evIDs)
				break
			}
		}
	}
	if evs, err := st.ClaimEvents(ctx, 10, time.Minute); err != nil || len(evs) != 0 {
		t.Errorf("after the relays: ClaimEvents = %v, %v; want nothing unsent", ids(evs), err)
	}
}

// crashAfterPublish is an outbox whose MarkSent never reaches the store:
// the relay "crashed" after publishing, before marking.
type crashAfterPublish struct{ MessagingStore }

func (crashAfterPublish) MarkSent(context.Context, []string) error {
	return errors.New("relay killed before marking sent")
}

// relayCrashRepublishes: a relay that publishes a batch and dies before
// marking it sent leaves it leased; once the lease ends, another relay
// publishes the same events again with the same ids, and nothing else
// twice.
func relayCrashRepublishes(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "c1", Topic: "t", Key: "K"}, idemrt.OutboxEvent{ID: "c2", Topic: "t", Key: "K"})
	rec := newRecorder()
	// A lease long enough for the check below on a loaded machine.
	const lease = 1500 * time.Millisecond
	crashed := &idemrt.Relay{Store: crashAfterPublish{st}, Publisher: rec, Batch: 1, Lease: lease}
	if n, err := crashed.RunOnce(ctx); n != 1 || err == nil {
		t.Fatalf("crashing relay: RunOnce = %d, %v; want 1 and the marking error", n, err)
	}
	next := &idemrt.Relay{Store: st, Publisher: rec, Batch: 10, Lease: time.Minute}
	// While c1's lease lasts, c2 (same key) waits too.
	if n, err := next.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("during the lease: RunOnce = %d, %v; want 0, nil", n, err)
	}
	time.Sleep(lease + 100*time.Millisecond)
	if n, err := next.RunOnce(ctx); n != 2 || err != nil {
		t.Fatalf("after the lease: RunOnce = %d, %v; want 2, nil", n, err)
	}
	if fmt.Sprint(rec.order["K"]) != "[c1 c1 c2]" {
		t.Fatalf("published %v, want [c1 c1 c2] (c1 again after the crash, with its id)", rec.order["K"])
	}
	if n, err := next.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want nothing left", n, err)
	}
}

// slowClaim is an outbox whose claims answer late (a slow network, a
// pause of the relay's process): the lease starts at the database when the
// claim runs, well before the relay sees the events.
type slowClaim struct {
	MessagingStore
	delay  time.Duration
	mu     sync.Mutex
	starts []time.Time // when each claim was sent
}

func (s *slowClaim) ClaimEvents(ctx context.Context, limit int, lease time.Duration) ([]idemrt.OutboxEvent, error) {
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	evs, err := s.MessagingStore.ClaimEvents(ctx, limit, lease)
	time.Sleep(s.delay)
	return evs, err
}

// relayPublishesWithinTheLease: a relay publishes a claimed batch only
// while the claim's lease lasts, counted from when the claim was sent (the
// earliest the database can have started it), not from when its answer
// arrived; after the lease another relay may claim and publish the same
// events, so a publish later than that is a duplicate, and for a key, out
// of order.
func relayPublishesWithinTheLease(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	var evs []idemrt.OutboxEvent
	for i := range 10 {
		evs = append(evs, idemrt.OutboxEvent{ID: fmt.Sprintf("w%02d", i), Topic: "t", Key: "K"})
	}
	inTx(t, ctx, st, evs...)
	const lease = time.Second
	slow := &slowClaim{MessagingStore: st, delay: 600 * time.Millisecond}
	var mu sync.Mutex
	var accepted []time.Time
	pub := pubFunc(func(ctx context.Context, ev idemrt.OutboxEvent) error {
		select {
		case <-time.After(150 * time.Millisecond): // a broker's round trip
		case <-ctx.Done():
			return ctx.Err()
		}
		now := time.Now() // taken before the check: the context was live at now
		if err := ctx.Err(); err != nil {
			return err
		}
		mu.Lock()
		accepted = append(accepted, now)
		mu.Unlock()
		return nil
	})
	r := &idemrt.Relay{Store: slow, Publisher: pub, Batch: 10, Lease: lease}
	n, err := r.RunOnce(ctx)
	if n != 10 || err == nil {
		t.Fatalf("RunOnce = %d, %v; want 10 claimed and the batch cut short by its lease", n, err)
	}
	end := slow.starts[0].Add(lease)
	for i, at := range accepted {
		if !at.Before(end) {
			t.Errorf("event %d published %v after the lease ended (another relay may have claimed it by then)", i, at.Sub(end))
		}
	}
	if len(accepted) == 0 || len(accepted) == 10 {
		t.Errorf("%d of 10 events published within the lease; want some, not all", len(accepted))
	}
}

type pubFunc func(ctx context.Context, ev idemrt.OutboxEvent) error

func (f pubFunc) Publish(ctx context.Context, ev idemrt.OutboxEvent) error { return f(ctx, ev) }

// relayLateReleaseKeepsAnotherLease: a relay whose Publisher outlives the
// lease (it ignores its context: a blocking write) and then fails must not
// release the batch, which another relay may have claimed since the lease
// ended: a release would end that relay's lease too, and a third claim
// would publish the events again beside it (duplicates, and a key's events
// out of order).
func relayLateReleaseKeepsAnotherLease(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "r1", Topic: "t", Key: "K"}, idemrt.OutboxEvent{ID: "r2", Topic: "t", Key: "K"})
	const lease = 500 * time.Millisecond
	publishing, unblock := make(chan struct{}), make(chan struct{})
	stuck := pubFunc(func(ctx context.Context, ev idemrt.OutboxEvent) error {
		close(publishing)
		<-unblock // deaf to ctx
		return errors.New("broker timed out")
	})
	done := make(chan error, 1)
	go func() {
		_, err := (&idemrt.Relay{Store: st, Publisher: stuck, Batch: 10, Lease: lease}).RunOnce(ctx)
		done <- err
	}()
	<-publishing
	time.Sleep(lease + 200*time.Millisecond)
	// The lease ended: another relay claims the batch, for a minute.
	if evs, err := st.ClaimEvents(ctx, 10, time.Minute); err != nil || fmt.Sprint(ids(evs)) != "[r1 r2]" {
		close(unblock)
		t.Fatalf("after the lease: ClaimEvents = %v, %v; want [r1 r2]", ids(evs), err)
	}
	close(unblock)
	if err := <-done; err == nil {
		t.Fatal("RunOnce = nil; want the publish error")
	}
	if evs, err := st.ClaimEvents(ctx, 10, time.Minute); err != nil || len(evs) != 0 {
		t.Fatalf("while the second claim holds them: ClaimEvents = %v, %v; want nothing (the late release ended another relay's lease)", ids(evs), err)
	}
}

// relayPoisonEventHoldsOnlyItsKey: an event the broker always refuses (too
// large for it, say) holds up the later events of its key, in order, and
// nothing else: the other keys' events, and events with no key, go out
// round after round; before, every round stopped at it and the whole
// outbox stalled behind it.
func relayPoisonEventHoldsOnlyItsKey(t *testing.T, st MessagingStore) {
	ctx := msgCtx(t)
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "p1", Topic: "t", Key: "A"}, idemrt.OutboxEvent{ID: "p2", Topic: "t", Key: "A"},
		idemrt.OutboxEvent{ID: "q1", Topic: "t", Key: "B"}, idemrt.OutboxEvent{ID: "q2", Topic: "t"})
	rec := newRecorder()
	rec.fail = func(ev idemrt.OutboxEvent) error {
		if ev.ID == "p1" {
			return errors.New("maximum payload exceeded")
		}
		return nil
	}
	r := &idemrt.Relay{Store: st, Publisher: rec, Batch: 10, Lease: time.Minute}
	n, err := r.RunOnce(ctx)
	if n != 4 || err == nil || !strings.Contains(err.Error(), "maximum payload") {
		t.Fatalf("RunOnce = %d, %v; want 4 claimed and p1's error", n, err)
	}
	if got := fmt.Sprint(rec.order[""], rec.order["A"], rec.order["B"]); got != "[q2] [] [q1]" {
		t.Fatalf("published (no key, A, B) %s; want [q2] [] [q1]: A held up behind p1, the others published", got)
	}
	inTx(t, ctx, st, idemrt.OutboxEvent{ID: "q3", Topic: "t", Key: "B"})
	if n, err := r.RunOnce(ctx); n != 3 || err == nil {
		t.Fatalf("second round: RunOnce = %d, %v; want p1, p2, q3 claimed and p1's error", n, err)
	}
	if got := fmt.Sprint(rec.order["A"], rec.order["B"]); got != "[] [q1 q3]" {
		t.Fatalf("after two rounds, published (A, B) %s; want [] [q1 q3]", got)
	}
	rec.fail = nil
	if n, err := r.RunOnce(ctx); n != 2 || err != nil || fmt.Sprint(rec.order["A"]) != "[p1 p2]" {
		t.Fatalf("once the broker takes p1: RunOnce = %d, %v, published A %v; want 2, nil, [p1 p2]", n, err, rec.order["A"])
	}
}
