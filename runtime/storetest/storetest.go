// Package storetest is the conformance suite every runtime.Store must pass.
// SQL stores run it against a real database:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idemrt.Store { return newStore(t) })
//	}
//
// The suite uses real time with short leases and TTLs (a few hundred
// milliseconds) and sleeps past them, so it works with stores that measure
// time on the database's clock. Every subtest has a key space of its own
// (its scope names the run and the subtest), so newStore may return stores
// that share one table, and the subtests run in parallel (go test's
// -parallel bounds how many at once): most of their time is spent
// sleeping past a lease or a TTL. The two subtests that sweep the whole
// table (one counts what Sweep deletes) run first, alone.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Timing of the suite. Lease and short TTLs are long enough for a database
// round trip and short enough to keep the suite quick.
const (
	shortLease = 300 * time.Millisecond
	pastLease  = 450 * time.Millisecond
	longLease  = time.Minute
	// shortTTL leaves a slow machine time to see the record completed
	// before it expires.
	shortTTL     = time.Second
	pastShortTTL = 1150 * time.Millisecond
	// sweepLag is how long after it expired a record may wait for Sweep:
	// one lease (Store.Sweep).
	sweepLag  = shortLease
	longTTL   = time.Hour
	fpVersion = 1
)

// Run runs the conformance suite. newStore is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) idemrt.Store) {
	t.Helper()
	RunWith(t, Config{}, newStore)
}

// Config describes what kind of store the suite runs against.
type Config struct {
	// SelfExpiring: the store's server deletes expired records on its own
	// (Redis keys with PEXPIRE), so Sweep deletes nothing and returns 0. The
	// sweep subtest then checks exactly that, and that expired records are
	// gone and live ones kept, instead of counting Sweep's deletions.
	SelfExpiring bool
}

// RunWith runs the conformance suite for a store described by cfg. Most
// subtests run in parallel, after the calling test function returns: call
// RunWith last in it, or in a t.Run of its own.
func RunWith(t *testing.T, cfg Config, newStore func(t *testing.T) idemrt.Store) {
	t.Helper()
	run := newRunID(t)
	s := &suite{run: run, newStore: newStore, cfg: cfg}
	type subtest struct {
		name string
		fn   func(t *testing.T, st idemrt.Store)
	}
	// wholeStore sweep every record of the store (one counts what Sweep
	// deletes): they run first, one after the other.
	wholeStore := []subtest{
		{"SweepDeletesOnlyExpiredInBatches", s.sweep},
		{"EpochsSurviveSweep", s.epochsSurviveSweep},
	}
	// keyed touch only keys of their own subtest's scope: they run in
	// parallel once RunWith has returned, after wholeStore.
	keyed := []subtest{
		{"SingleClaim", s.singleClaim},
		{"ConcurrentClaimsOneWinner", s.concurrentClaims},
		{"CompletedReplaysSavedResponse", s.completedReplay},
		{"FingerprintReturnedForMismatch", s.fingerprintReturned},
		{"InProgressReportsLease", s.inProgressLease},
		{"LeaseExpiryTakeover", s.takeover},
		{"StaleEpochFencedOnComplete", s.fencedComplete},
		{"StaleEpochFencedOnRelease", s.fencedRelease},
		{"LateCompletionWithoutTakeover", s.lateCompletion},
		{"ReleaseThenReclaim", s.releaseReclaim},
		{"FencedAcrossRelease", s.fencedAcrossRelease},
		{"CompletedRecordCannotBeReleased", s.releaseCompleted},
		{"ExpiredCompletedIsAbsent", s.expiredCompleted},
		{"Tombstone", s.tombstone},
		{"ReplayReadsBackEveryField", s.replayFields},
		{"BinaryBodies", s.binaryBodies},
		{"MultiValuedHeaders", s.multiValuedHeaders},
		{"PrincipalIsolation", s.principalIsolation},
		{"ScopeIsolation", s.scopeIsolation},
		{"LongKey", s.longKey},
		{"KeysAreCaseSensitive", s.caseSensitive},
		{"TxCommitPersists", s.txCommit},
		{"TxRollbackLeavesInProgress", s.txRollback},
		{"TxFencedComplete", s.txFenced},
		{"ClaimTxCommitsOnce", s.claimTxCommit},
		{"ClaimTxRollbackLeavesNothing", s.claimTxRollback},
		{"ClaimTxLiveRecordNoTx", s.claimTxLive},
		{"ClaimTxTakeoverRollsBack", s.claimTxTakeover},
		{"ClaimTxConcurrentNeverAcquires", s.claimTxConcurrent},
		{"ClaimTxWrongEpochNeverCommits", s.claimTxWrongEpoch},
	}
	subtests := func(list []subtest, parallel bool) {
		for _, tc := range list {
			t.Run(tc.name, func(t *testing.T) {
				if parallel {
					t.Parallel()
				}
				st := newStore(t)
				if st == nil {
					t.Fatal("newStore returned nil")
				}
				tc.fn(t, st)
			})
		}
	}
	subtests(wholeStore, false)
	subtests(keyed, true)
}

type suite struct {
	cfg      Config
	run      string
	newStore func(t *testing.T) idemrt.Store
	n        atomic.Int64
}

func newRunID(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random run id: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// key returns a record key unique to this run and call, in the key space
// of t's subtest: its scope names the run and the subtest.
func (s *suite) key(t *testing.T) idemrt.RecordKey {
	n := s.n.Add(1)
	return idemrt.RecordKey{
		Scope:         "storetest-" + s.run + "-" + path.Base(t.Name()),
		PrincipalHash: idemrt.HashPrincipal("user-" + s.run),
		Key:           fmt.Sprintf("k-%s-%d", s.run, n),
	}
}

func fp(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func claimReq(k idemrt.RecordKey, f [32]byte, lease, ttl time.Duration) idemrt.ClaimRequest {
	return idemrt.ClaimRequest{RecordKey: k, Fingerprint: f, FingerprintVersion: fpVersion, Lease: lease, TTL: ttl}
}

func mustClaim(t *testing.T, st idemrt.Store, req idemrt.ClaimRequest) idemrt.ClaimResult {
	t.Helper()
	res, err := st.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("Claim(%q): %v", req.Key, err)
	}
	return res
}

func wantState(t *testing.T, res idemrt.ClaimResult, want idemrt.ClaimState) {
	t.Helper()
	if res.State != want {
		t.Fatalf("claim state = %v, want %v (result %+v)", res.State, want, res)
	}
}

func sampleResponse() *idemrt.SavedResponse {
	return &idemrt.SavedResponse{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/v1/orders/42"},
		},
		Body: []byte(`{"id":42,"status":"paid"}`),
	}
}

func complete(t *testing.T, st idemrt.Store, k idemrt.RecordKey, epoch int64, r *idemrt.SavedResponse, ttl time.Duration) {
	t.Helper()
	if err := st.Complete(context.Background(), idemrt.Completion{RecordKey: k, Epoch: epoch, Response: r, TTL: ttl}); err != nil {
		t.Fatalf("Complete(%q, epoch %d): %v", k.Key, epoch, err)
	}
}

// txComplete completes k at epoch with sampleResponse in tx, and rolls tx
// back and fails t if that fails.
func txComplete(t *testing.T, tx idemrt.Tx, k idemrt.RecordKey, epoch int64) {
	t.Helper()
	ctx := context.Background()
	if err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: epoch, Response: sampleResponse(), TTL: longTTL}); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("Tx.Complete(%q, epoch %d): %v", k.Key, epoch, err)
	}
}

func sameResponse(t *testing.T, got, want *idemrt.SavedResponse) {
	t.Helper()
	if got == nil {
		t.Fatal("completed record has no response")
	}
	if got.Status != want.Status {
		t.Errorf("status = %d, want %d", got.Status, want.Status)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("body = %q, want %q", got.Body, want.Body)
	}
	gh, wh := normHeader(got.Header), normHeader(want.Header)
	if !reflect.DeepEqual(gh, wh) {
		t.Errorf("header = %v, want %v", gh, wh)
	}
}

func normHeader(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		if len(vs) > 0 {
			out[k] = vs
		}
	}
	return out
}

func (s *suite) singleClaim(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	if res.Epoch <= 0 {
		t.Errorf("epoch of a new record = %d, want more than 0", res.Epoch)
	}
	if res.TakenOver {
		t.Error("TakenOver set on a new record")
	}
	again := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, again, idemrt.InProgress)
	if again.Epoch != res.Epoch {
		t.Errorf("in-progress epoch = %d, want the claim's %d", again.Epoch, res.Epoch)
	}
}

func (s *suite) concurrentClaims(t *testing.T, st idemrt.Store) {
	const n = 64
	k := s.key(t)
	var acquired, inProgress atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := st.Claim(context.Background(), claimReq(k, fp("same"), longLease, longTTL))
			if err != nil {
				errs <- err
				return
			}
			switch res.State {
			case idemrt.Acquired:
				acquired.Add(1)
			case idemrt.InProgress:
				inProgress.Add(1)
			default:
				errs <- fmt.Errorf("unexpected state %v", res.State)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent claim: %v", err)
	}
	if got := acquired.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent claims acquired the key, want exactly 1", got, n)
	}
	if got := inProgress.Load(); got != n-1 {
		t.Errorf("%d claims saw in_progress, want %d", got, n-1)
	}
}

func (s *suite) completedReplay(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	want := sampleResponse()
	complete(t, st, k, res.Epoch, want, longTTL)
	for i := 0; i < 2; i++ {
		got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
		wantState(t, got, idemrt.Completed)
		if got.Tombstone {
			t.Fatal("completed record reported as a tombstone")
		}
		sameResponse(t, got.Response, sampleResponse())
		if got.Fingerprint != fp("a") || got.FingerprintVersion != fpVersion {
			t.Errorf("fingerprint of completed record = %x v%d, want %x v%d", got.Fingerprint, got.FingerprintVersion, fp("a"), fpVersion)
		}
	}
}

func (s *suite) fingerprintReturned(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("first"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	// In progress: a claim with another fingerprint must see the stored one.
	other := mustClaim(t, st, claimReq(k, fp("second"), longLease, longTTL))
	wantState(t, other, idemrt.InProgress)
	if other.Fingerprint != fp("first") {
		t.Errorf("in-progress fingerprint = %x, want the first claim's %x", other.Fingerprint, fp("first"))
	}
	if other.FingerprintVersion != fpVersion {
		t.Errorf("fingerprint version = %d, want %d", other.FingerprintVersion, fpVersion)
	}
	complete(t, st, k, res.Epoch, sampleResponse(), longTTL)
	done := mustClaim(t, st, claimReq(k, fp("second"), longLease, longTTL))
	wantState(t, done, idemrt.Completed)
	if done.Fingerprint != fp("first") {
		t.Errorf("completed fingerprint = %x, want the first claim's %x", done.Fingerprint, fp("first"))
	}
}

func (s *suite) inProgressLease(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), 30*time.Second, longTTL)), idemrt.Acquired)
	res := mustClaim(t, st, claimReq(k, fp("a"), 30*time.Second, longTTL))
	wantState(t, res, idemrt.InProgress)
	if res.LeaseRemaining <= 0 || res.LeaseRemaining > 30*time.Second {
		t.Errorf("LeaseRemaining = %v, want within (0, 30s]", res.LeaseRemaining)
	}
}

func (s *suite) takeover(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	first := mustClaim(t, st, claimReq(k, fp("a"), shortLease, longTTL))
	wantState(t, first, idemrt.Acquired)
	time.Sleep(pastLease)
	second := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, second, idemrt.Acquired)
	if !second.TakenOver {
		t.Error("TakenOver not set after the lease ended")
	}
	if second.Epoch != first.Epoch+1 {
		t.Errorf("takeover epoch = %d, want %d", second.Epoch, first.Epoch+1)
	}
	// The new owner holds a fresh (long) lease.
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL)), idemrt.InProgress)
}

// takenOver claims k, lets the lease end and takes it over; it returns the
// old and the new epoch.
func (s *suite) takenOver(t *testing.T, st idemrt.Store, k idemrt.RecordKey) (int64, int64) {
	t.Helper()
	first := mustClaim(t, st, claimReq(k, fp("a"), shortLease, longTTL))
	wantState(t, first, idemrt.Acquired)
	time.Sleep(pastLease)
	second := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, second, idemrt.Acquired)
	return first.Epoch, second.Epoch
}

func (s *suite) fencedComplete(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	oldEpoch, newEpoch := s.takenOver(t, st, k)
	stale := &idemrt.SavedResponse{Status: 200, Header: http.Header{}, Body: []byte("stale")}
	err := st.Complete(context.Background(), idemrt.Completion{RecordKey: k, Epoch: oldEpoch, Response: stale, TTL: longTTL})
	if !errors.Is(err, idemrt.ErrFenced) {
		t.Fatalf("Complete with the stale epoch: err = %v, want ErrFenced", err)
	}
	// The stale completion changed nothing: the new owner still holds it.
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL)), idemrt.InProgress)
	complete(t, st, k, newEpoch, sampleResponse(), longTTL)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
	// Once completed, the stale epoch still cannot overwrite it.
	err = st.Complete(context.Background(), idemrt.Completion{RecordKey: k, Epoch: oldEpoch, Response: stale, TTL: longTTL})
	if !errors.Is(err, idemrt.ErrFenced) {
		t.Fatalf("stale Complete after completion: err = %v, want ErrFenced", err)
	}
	got = mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	sameResponse(t, got.Response, sampleResponse())
}

func (s *suite) fencedRelease(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	oldEpoch, newEpoch := s.takenOver(t, st, k)
	if err := st.Release(context.Background(), k, oldEpoch); !errors.Is(err, idemrt.ErrFenced) {
		t.Fatalf("Release with the stale epoch: err = %v, want ErrFenced", err)
	}
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.InProgress)
	if res.Epoch != newEpoch {
		t.Errorf("epoch after the fenced release = %d, want %d", res.Epoch, newEpoch)
	}
}

func (s *suite) lateCompletion(t *testing.T, st idemrt.Store) {
	// A lease that ended without anyone taking over does not fence its owner.
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), shortLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	time.Sleep(pastLease)
	complete(t, st, k, res.Epoch, sampleResponse(), longTTL)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
}

func (s *suite) releaseReclaim(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	if err := st.Release(context.Background(), k, res.Epoch); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, again, idemrt.Acquired)
	if again.TakenOver {
		t.Error("TakenOver set on a claim after a release")
	}
	// The released record is gone: the new claim's fingerprint is the one kept.
	check := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, check, idemrt.InProgress)
	if check.Fingerprint != fp("b") {
		t.Errorf("fingerprint after re-claim = %x, want the new claim's", check.Fingerprint)
	}
	// The first owner cannot release the new claim: epochs go on counting
	// across a release (see fencedAcrossRelease).
	if again.Epoch <= res.Epoch {
		t.Errorf("epoch after release = %d, want more than %d", again.Epoch, res.Epoch)
	}
	if err := st.Release(context.Background(), k, res.Epoch); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("second Release with the old epoch: err = %v, want ErrFenced", err)
	}
}

func (s *suite) releaseCompleted(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	complete(t, st, k, res.Epoch, sampleResponse(), longTTL)
	if err := st.Release(context.Background(), k, res.Epoch); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("Release of a completed record: err = %v, want ErrFenced", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
}

func (s *suite) expiredCompleted(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), shortLease, shortTTL))
	wantState(t, res, idemrt.Acquired)
	complete(t, st, k, res.Epoch, sampleResponse(), shortTTL)
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), shortLease, longTTL)), idemrt.Completed)
	time.Sleep(pastShortTTL)
	again := mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, again, idemrt.Acquired)
	if again.TakenOver {
		t.Error("TakenOver set when claiming over an expired completed record")
	}
	complete(t, st, k, again.Epoch, &idemrt.SavedResponse{Status: 200, Header: http.Header{}, Body: []byte("second")}, longTTL)
	got := mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	if string(got.Response.Body) != "second" || got.Fingerprint != fp("b") {
		t.Errorf("after expiry the key holds %q / %x, want the second run's result", got.Response.Body, got.Fingerprint)
	}
}

func (s *suite) tombstone(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	complete(t, st, k, res.Epoch, nil, longTTL)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	if !got.Tombstone {
		t.Error("Tombstone not set for a completion without a response")
	}
	if got.Response != nil {
		t.Errorf("tombstone carries a response: %+v", got.Response)
	}
	if got.Fingerprint != fp("a") {
		t.Error("tombstone lost its fingerprint")
	}
}

// replayFields checks what a claim reads back from records of every kind:
// the status (across its range), headers, body, fingerprint and fingerprint
// version of a replay, a tombstone's version, and the lease of an attempt
// in progress, as a store that packs or computes columns in its read might
// get one of them wrong.
func (s *suite) replayFields(t *testing.T, st idemrt.Store) {
	req := func(version int) idemrt.ClaimRequest {
		r := claimReq(s.key(t), fp("replay-fields"), longLease, longTTL)
		r.FingerprintVersion = version
		return r
	}
	claimComplete := func(r idemrt.ClaimRequest, resp *idemrt.SavedResponse) {
		t.Helper()
		res := mustClaim(t, st, r)
		wantState(t, res, idemrt.Acquired)
		complete(t, st, r.RecordKey, res.Epoch, resp, longTTL)
	}
	for _, status := range []int{100, 201, 409, 599, 999, 1023} {
		r := req(1 + status%15)
		want := &idemrt.SavedResponse{Status: status, Header: http.Header{"X-A": {"1", "2"}}, Body: []byte("body")}
		claimComplete(r, want)
		res := mustClaim(t, st, r)
		wantState(t, res, idemrt.Completed)
		if res.FingerprintVersion != r.FingerprintVersion || res.Fingerprint != r.Fingerprint {
			t.Errorf("status %d: fingerprint version %d, fingerprint %x; want %d, %x", status, res.FingerprintVersion, res.Fingerprint, r.FingerprintVersion, r.Fingerprint)
		}
		sameResponse(t, res.Response, want)
	}
	tomb := req(15)
	claimComplete(tomb, nil)
	if res := mustClaim(t, st, tomb); !res.Tombstone || res.FingerprintVersion != 15 {
		t.Errorf("tombstone: %+v; want Tombstone with fingerprint version 15", res)
	}
	held := req(2)
	wantState(t, mustClaim(t, st, held), idemrt.Acquired)
	res := mustClaim(t, st, held)
	wantState(t, res, idemrt.InProgress)
	if res.FingerprintVersion != 2 || res.LeaseRemaining <= longLease-10*time.Second || res.LeaseRemaining > longLease {
		t.Errorf("in progress: fingerprint version %d, lease remaining %v; want 2 and about %v", res.FingerprintVersion, res.LeaseRemaining, longLease)
	}
}

func (s *suite) binaryBodies(t *testing.T, st idemrt.Store) {
	all := make([]byte, 0, 512)
	for i := 0; i < 256; i++ {
		all = append(all, byte(i))
	}
	for i := 255; i >= 0; i-- {
		all = append(all, byte(i))
	}
	cases := map[string][]byte{
		"all-bytes":    all,
		"empty":        {},
		"nul-only":     {0, 0, 0},
		"invalid-utf8": {0xff, 0xfe, 0xc3, 0x28, 'a'},
	}
	for name, body := range cases {
		k := s.key(t)
		res := mustClaim(t, st, claimReq(k, fp(name), longLease, longTTL))
		wantState(t, res, idemrt.Acquired)
		want := &idemrt.SavedResponse{Status: 200, Header: http.Header{"Content-Type": {"application/octet-stream"}}, Body: body}
		complete(t, st, k, res.Epoch, want, longTTL)
		got := mustClaim(t, st, claimReq(k, fp(name), longLease, longTTL))
		wantState(t, got, idemrt.Completed)
		if got.Response == nil {
			t.Fatalf("%s: no response", name)
		}
		if !bytes.Equal(got.Response.Body, body) {
			t.Errorf("%s: body = %x, want %x", name, got.Response.Body, body)
		}
		if got.Tombstone {
			t.Errorf("%s: a saved (possibly empty) body reads back as a tombstone", name)
		}
	}
}

func (s *suite) multiValuedHeaders(t *testing.T, st idemrt.Store) {
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	want := &idemrt.SavedResponse{
		Status: 202,
		Header: http.Header{
			"Link":         {`</a>; rel="next"`, `</b>; rel="prev"`, `</c>; rel="last"`},
			"X-Empty":      {""},
			"X-Comma":      {"a, b", "c"},
			"X-Unicode":    {"caf\u00e9 \u2603"},
			"Content-Type": {"text/plain; charset=utf-8"},
		},
		Body: []byte("ok"),
	}
	complete(t, st, k, res.Epoch, want, longTTL)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, want)
}

func (s *suite) principalIsolation(t *testing.T, st idemrt.Store) {
	a := s.key(t)
	b := a
	b.PrincipalHash = idemrt.HashPrincipal("other-user-" + s.run)
	anon := a
	anon.PrincipalHash = [32]byte{}
	ra := mustClaim(t, st, claimReq(a, fp("a"), longLease, longTTL))
	wantState(t, ra, idemrt.Acquired)
	complete(t, st, a, ra.Epoch, sampleResponse(), longTTL)
	for _, other := range []idemrt.RecordKey{b, anon} {
		rb := mustClaim(t, st, claimReq(other, fp("b"), longLease, longTTL))
		wantState(t, rb, idemrt.Acquired)
		if rb.Epoch <= 0 || rb.TakenOver {
			t.Errorf("other principal's record epoch %d takenOver %v, want a fresh record", rb.Epoch, rb.TakenOver)
		}
		complete(t, st, other, rb.Epoch, &idemrt.SavedResponse{Status: 200, Header: http.Header{}, Body: []byte("other")}, longTTL)
	}
	got := mustClaim(t, st, claimReq(a, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
	gotB := mustClaim(t, st, claimReq(b, fp("b"), longLease, longTTL))
	if gotB.Response == nil || string(gotB.Response.Body) != "other" {
		t.Errorf("principal b sees %+v, want its own response", gotB.Response)
	}
}

func (s *suite) scopeIsolation(t *testing.T, st idemrt.Store) {
	a := s.key(t)
	b := a
	b.Scope = a.Scope + "-other"
	ra := mustClaim(t, st, claimReq(a, fp("a"), longLease, longTTL))
	wantState(t, ra, idemrt.Acquired)
	rb := mustClaim(t, st, claimReq(b, fp("a"), longLease, longTTL))
	wantState(t, rb, idemrt.Acquired)
	complete(t, st, a, ra.Epoch, sampleResponse(), longTTL)
	wantState(t, mustClaim(t, st, claimReq(b, fp("a"), longLease, longTTL)), idemrt.InProgress)
	if err := st.Release(context.Background(), b, rb.Epoch); err != nil {
		t.Fatalf("Release in scope b: %v", err)
	}
	wantState(t, mustClaim(t, st, claimReq(a, fp("a"), longLease, longTTL)), idemrt.Completed)
}

func (s *suite) longKey(t *testing.T, st idemrt.Store) {
	// Keys are up to 255 visible ASCII characters, any of them.
	base := s.key(t)
	var b []byte
	b = append(b, base.Key...)
	b = append(b, '-')
	for c := byte('!'); len(b) < 255; c++ {
		if c > '~' {
			c = '!'
		}
		b = append(b, c)
	}
	k := base
	k.Key = string(b)
	k.Scope = base.Scope + `:op/with "odd" chars`
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	complete(t, st, k, res.Epoch, sampleResponse(), longTTL)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
	// A key that differs only in its last character is another record.
	k2 := k
	k2.Key = k.Key[:254] + "#"
	if k2.Key == k.Key {
		k2.Key = k.Key[:254] + "$"
	}
	wantState(t, mustClaim(t, st, claimReq(k2, fp("a"), longLease, longTTL)), idemrt.Acquired)
}

func (s *suite) sweep(t *testing.T, st idemrt.Store) {
	ctx := context.Background()
	// Drain what earlier runs left expired (this subtest runs first).
	for i := 0; i < 10000; i++ {
		n, err := st.Sweep(ctx, 100)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if n < 100 {
			break
		}
	}
	const expired, live, batch = 25, 5, 10
	var liveKeys, expiredKeys []idemrt.RecordKey
	for i := 0; i < expired; i++ {
		k := s.key(t)
		expiredKeys = append(expiredKeys, k)
		res := mustClaim(t, st, claimReq(k, fp("x"), shortLease, shortLease))
		wantState(t, res, idemrt.Acquired)
		if i%2 == 0 { // half completed, half left in progress
			complete(t, st, k, res.Epoch, sampleResponse(), shortLease)
		}
	}
	for i := 0; i < live; i++ {
		k := s.key(t)
		res := mustClaim(t, st, claimReq(k, fp("x"), shortLease, longTTL))
		wantState(t, res, idemrt.Acquired)
		complete(t, st, k, res.Epoch, sampleResponse(), longTTL)
		liveKeys = append(liveKeys, k)
	}
	time.Sleep(pastLease + sweepLag)
	if s.cfg.SelfExpiring {
		s.selfExpired(t, st, expiredKeys, liveKeys)
		return
	}
	var total int
	var batches []int
	for i := 0; i < 100; i++ {
		n, err := st.Sweep(ctx, batch)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if n > batch {
			t.Fatalf("Sweep(limit %d) deleted %d records", batch, n)
		}
		batches = append(batches, n)
		total += n
		if n < batch {
			break
		}
	}
	if total != expired {
		t.Errorf("Sweep deleted %d records in batches %v, want %d", total, batches, expired)
	}
	if len(batches) < 3 {
		t.Errorf("Sweep batches %v: want the %d records deleted in batches of at most %d", batches, expired, batch)
	}
	for _, k := range liveKeys {
		got := mustClaim(t, st, claimReq(k, fp("x"), longLease, longTTL))
		wantState(t, got, idemrt.Completed)
		sameResponse(t, got.Response, sampleResponse())
	}
	if n, err := st.Sweep(ctx, batch); err != nil || n != 0 {
		t.Errorf("Sweep after draining = %d, %v; want 0, nil", n, err)
	}
}

// selfExpired is the end of the sweep subtest for a SelfExpiring store:
// Sweep deletes nothing, the expired records are absent (a claim acquires
// them afresh) and the live ones replay.
func (s *suite) selfExpired(t *testing.T, st idemrt.Store, expired, live []idemrt.RecordKey) {
	ctx := context.Background()
	if n, err := st.Sweep(ctx, 10); err != nil || n != 0 {
		t.Errorf("Sweep of a self-expiring store = %d, %v; want 0, nil", n, err)
	}
	for _, k := range expired {
		got := mustClaim(t, st, claimReq(k, fp("y"), longLease, longTTL))
		wantState(t, got, idemrt.Acquired)
		if got.TakenOver {
			t.Errorf("claim of an expired record reports a takeover: %+v", got)
		}
	}
	for _, k := range live {
		got := mustClaim(t, st, claimReq(k, fp("x"), longLease, longTTL))
		wantState(t, got, idemrt.Completed)
		sameResponse(t, got.Response, sampleResponse())
	}
}

func txStore(t *testing.T, st idemrt.Store) idemrt.TxStore {
	t.Helper()
	ts, ok := st.(idemrt.TxStore)
	if !ok {
		t.Skip("store does not implement TxStore")
	}
	return ts
}

func (s *suite) txCommit(t *testing.T, st idemrt.Store) {
	ts := txStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	txComplete(t, tx, k, res.Epoch)
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
}

func (s *suite) txRollback(t *testing.T, st idemrt.Store) {
	ts := txStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	txComplete(t, tx, k, res.Epoch)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.InProgress)
	if got.Epoch != res.Epoch {
		t.Errorf("epoch after rollback = %d, want %d", got.Epoch, res.Epoch)
	}
	// The owner can still release (or complete) after the rollback.
	if err := st.Release(ctx, k, res.Epoch); err != nil {
		t.Fatalf("Release after rollback: %v", err)
	}
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL)), idemrt.Acquired)
}

func (s *suite) txFenced(t *testing.T, st idemrt.Store) {
	ts := txStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	oldEpoch, _ := s.takenOver(t, st, k)
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	err = tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: oldEpoch, Response: sampleResponse(), TTL: longTTL})
	if err == nil {
		// A store may only detect the fence at commit.
		err = tx.Commit(ctx)
	} else {
		_ = tx.Rollback(ctx)
	}
	if !errors.Is(err, idemrt.ErrFenced) {
		t.Fatalf("stale Tx.Complete/Commit: err = %v, want ErrFenced", err)
	}
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL)), idemrt.InProgress)
}

func (s *suite) caseSensitive(t *testing.T, st idemrt.Store) {
	// Keys and scopes compare byte for byte (a case-insensitive collation
	// would merge two clients' keys).
	lower := s.key(t)
	lower.Key += "-abc"
	upper := lower
	upper.Key = lower.Key[:len(lower.Key)-3] + "ABC"
	wantState(t, mustClaim(t, st, claimReq(lower, fp("a"), longLease, longTTL)), idemrt.Acquired)
	wantState(t, mustClaim(t, st, claimReq(upper, fp("a"), longLease, longTTL)), idemrt.Acquired)
	scoped := lower
	scoped.Scope = lower.Scope + "-SCOPE"
	scoped2 := lower
	scoped2.Scope = lower.Scope + "-scope"
	wantState(t, mustClaim(t, st, claimReq(scoped, fp("a"), longLease, longTTL)), idemrt.Acquired)
	wantState(t, mustClaim(t, st, claimReq(scoped2, fp("a"), longLease, longTTL)), idemrt.Acquired)
}

// fencedAcrossRelease: worker A's lease ends, B takes the key over and
// releases it, C claims it. A's late completion must still be fenced: a
// store that deleted released records and restarted epochs at 1 would let
// A overwrite C's record. (epochsSurviveSweep covers the deletion that does
// happen: the sweeper's.)
func (s *suite) fencedAcrossRelease(t *testing.T, st idemrt.Store) {
	ctx := context.Background()
	k := s.key(t)
	req := func(lease time.Duration) idemrt.ClaimRequest {
		return idemrt.ClaimRequest{RecordKey: k, Lease: lease, TTL: time.Hour}
	}
	a, err := st.Claim(ctx, req(shortLease))
	if err != nil || a.State != idemrt.Acquired {
		t.Fatalf("A's claim: %+v, %v", a, err)
	}
	time.Sleep(pastLease)
	b, err := st.Claim(ctx, req(time.Minute))
	if err != nil || b.State != idemrt.Acquired || !b.TakenOver {
		t.Fatalf("B's takeover: %+v, %v", b, err)
	}
	if err := st.Release(ctx, k, b.Epoch); err != nil {
		t.Fatalf("B's release: %v", err)
	}
	c, err := st.Claim(ctx, req(time.Minute))
	if err != nil || c.State != idemrt.Acquired || c.TakenOver {
		t.Fatalf("C's claim after the release: %+v, %v", c, err)
	}
	if c.Epoch <= b.Epoch {
		t.Errorf("C's epoch %d does not follow B's %d", c.Epoch, b.Epoch)
	}
	late := idemrt.Completion{RecordKey: k, Epoch: a.Epoch, TTL: time.Hour, Response: &idemrt.SavedResponse{Status: 200, Body: []byte("A")}}
	if err := st.Complete(ctx, late); err != idemrt.ErrFenced {
		t.Fatalf("A's late completion: %v, want ErrFenced", err)
	}
	if err := st.Release(ctx, k, b.Epoch); err != idemrt.ErrFenced {
		t.Errorf("B's second release: %v, want ErrFenced", err)
	}
	got, err := st.Claim(ctx, req(time.Minute))
	if err != nil || got.State != idemrt.InProgress || got.Epoch != c.Epoch {
		t.Errorf("after A's late completion: %+v, %v; want C's record in progress at epoch %d", got, err, c.Epoch)
	}
	if err := st.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: c.Epoch, TTL: time.Hour, Response: &idemrt.SavedResponse{Status: 201, Body: []byte("C")}}); err != nil {
		t.Fatalf("C's completion: %v", err)
	}
	got, err = st.Claim(ctx, req(time.Minute))
	if err != nil || got.State != idemrt.Completed || string(got.Response.Body) != "C" {
		t.Errorf("replay: %+v, %v; want C's response", got, err)
	}
}

// epochsSurviveSweep: worker A claims with a short lease and TTL and stalls
// past the TTL; the sweeper deletes the record and B claims the key afresh.
// B's epoch must differ from (and follow) every epoch the deleted record
// handed out, so that A's late Complete and Release are fenced: a store that
// started every new record at epoch 1 would let A overwrite B's record.
func (s *suite) epochsSurviveSweep(t *testing.T, st idemrt.Store) {
	ctx := context.Background()
	k := s.key(t)
	a := mustClaim(t, st, claimReq(k, fp("a"), shortLease, shortTTL))
	wantState(t, a, idemrt.Acquired)
	time.Sleep(pastShortTTL + sweepLag)
	// Sweep until nothing expired is left: A's record is gone.
	for i := 0; ; i++ {
		n, err := st.Sweep(ctx, 100)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if n == 0 {
			break
		}
		if i > 10000 {
			t.Fatal("Sweep never ran out of expired records")
		}
	}
	b := mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, b, idemrt.Acquired)
	if b.TakenOver {
		t.Errorf("B's claim of a swept key reports a takeover: %+v", b)
	}
	if b.Epoch <= a.Epoch {
		t.Errorf("B's epoch %d after the sweep does not follow A's %d", b.Epoch, a.Epoch)
	}
	late := idemrt.Completion{RecordKey: k, Epoch: a.Epoch, TTL: longTTL, Response: &idemrt.SavedResponse{Status: 200, Header: http.Header{}, Body: []byte("A")}}
	if err := st.Complete(ctx, late); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("A's late completion after the sweep: %v, want ErrFenced", err)
	}
	if err := st.Release(ctx, k, a.Epoch); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("A's late release after the sweep: %v, want ErrFenced", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, got, idemrt.InProgress)
	if got.Epoch != b.Epoch || got.Fingerprint != fp("b") {
		t.Fatalf("B's record after A's late calls: epoch %d fingerprint %x, want epoch %d and B's fingerprint", got.Epoch, got.Fingerprint[:4], b.Epoch)
	}
	complete(t, st, k, b.Epoch, &idemrt.SavedResponse{Status: 201, Header: http.Header{}, Body: []byte("B")}, longTTL)
	got = mustClaim(t, st, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	if got.Response == nil || got.Response.Status != 201 || string(got.Response.Body) != "B" {
		t.Errorf("replay: %+v, want B's response", got.Response)
	}
}

func claimTxStore(t *testing.T, st idemrt.Store) idemrt.ClaimTxStore {
	t.Helper()
	ts, ok := st.(idemrt.ClaimTxStore)
	if !ok {
		t.Skip("store does not implement ClaimTxStore")
	}
	return ts
}

// beginClaim calls BeginClaim and checks that the transaction comes with
// Acquired and only with it.
func beginClaim(t *testing.T, ts idemrt.ClaimTxStore, ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult) {
	t.Helper()
	tx, res, err := ts.BeginClaim(ctx, req)
	if err != nil {
		t.Fatalf("BeginClaim(%q): %v", req.Key, err)
	}
	if (tx != nil) != (res.State == idemrt.Acquired) {
		t.Fatalf("BeginClaim(%q): state %v with transaction %v", req.Key, res.State, tx != nil)
	}
	return tx, res
}

// A claim in a transaction, completed and committed there: the record is
// complete, and BeginClaim of it answers from the record, without a
// transaction.
func (s *suite) claimTxCommit(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	tx, res := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	if res.Epoch <= 0 || res.TakenOver {
		t.Errorf("new record: epoch %d, taken over %v", res.Epoch, res.TakenOver)
	}
	txComplete(t, tx, k, res.Epoch)
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Completed)
	sameResponse(t, got.Response, sampleResponse())
	_, again := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, again, idemrt.Completed)
	sameResponse(t, again.Response, sampleResponse())
}

// A rolled-back claim leaves nothing: the next claim acquires a fresh
// record at once (no lease to wait out, nothing taken over), and the
// rolled-back attempt's epoch is fenced.
func (s *suite) claimTxRollback(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	tx, res := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	txComplete(t, tx, k, res.Epoch)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Acquired)
	if got.TakenOver {
		t.Error("claim after a rolled-back claim reports TakenOver; nothing should be left")
	}
	complete(t, st, k, got.Epoch, sampleResponse(), longTTL)
}

// A committed live record (in progress or completed) is reported without a
// transaction.
func (s *suite) claimTxLive(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	res := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	_, got := beginClaim(t, ts, ctx, claimReq(k, fp("b"), longLease, longTTL))
	wantState(t, got, idemrt.InProgress)
	if got.Fingerprint != fp("a") || got.Epoch != res.Epoch {
		t.Errorf("in progress: fingerprint %x epoch %d, want the record's (epoch %d)", got.Fingerprint[:4], got.Epoch, res.Epoch)
	}
}

// A claim in a transaction may take over a record whose lease ended; a
// rollback puts the record back as it was, so the next claim takes it over
// again.
func (s *suite) claimTxTakeover(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	first := mustClaim(t, st, claimReq(k, fp("a"), shortLease, longTTL))
	wantState(t, first, idemrt.Acquired)
	time.Sleep(shortLease + 150*time.Millisecond)
	tx, res := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	if !res.TakenOver || res.Epoch != first.Epoch+1 {
		t.Errorf("takeover in a transaction: epoch %d taken over %v, want %d and true", res.Epoch, res.TakenOver, first.Epoch+1)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	again := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, again, idemrt.Acquired)
	if !again.TakenOver || again.Epoch != first.Epoch+1 {
		t.Errorf("after the rolled-back takeover: epoch %d taken over %v, want %d and true", again.Epoch, again.TakenOver, first.Epoch+1)
	}
}

// While one transaction holds a claim, a concurrent BeginClaim of the same
// key never acquires it: it is told InProgress (at once, or when its wait
// ends) or, if it waits for the first transaction, reads the completed
// record.
func (s *suite) claimTxConcurrent(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	tx, res := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	type outcome struct {
		tx  idemrt.Tx
		res idemrt.ClaimResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		tx, res, err := ts.BeginClaim(wctx, claimReq(k, fp("a"), longLease, longTTL))
		if tx != nil {
			_ = tx.Rollback(ctx)
		}
		done <- outcome{tx, res, err}
	}()
	var early *outcome
	select {
	case o := <-done:
		early = &o
	case <-time.After(300 * time.Millisecond):
	}
	txComplete(t, tx, k, res.Epoch)
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	o := early
	if o == nil {
		got := <-done
		o = &got
	}
	if o.err != nil {
		t.Fatalf("concurrent BeginClaim: %v", o.err)
	}
	if o.tx != nil || (o.res.State != idemrt.InProgress && o.res.State != idemrt.Completed) {
		t.Fatalf("concurrent BeginClaim: %v (transaction %v), want InProgress or Completed", o.res.State, o.tx != nil)
	}
	wantState(t, mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL)), idemrt.Completed)
}

// A completion that does not match the claim (a wrong epoch) fails, in
// Tx.Complete or at the latest in Commit, and nothing of the transaction
// is committed: the next claim is fresh.
func (s *suite) claimTxWrongEpoch(t *testing.T, st idemrt.Store) {
	ts := claimTxStore(t, st)
	ctx := context.Background()
	k := s.key(t)
	tx, res := beginClaim(t, ts, ctx, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, res, idemrt.Acquired)
	err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch + 1, Response: sampleResponse(), TTL: longTTL})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err == nil {
		t.Fatal("a completion at the wrong epoch completed and committed")
	}
	_ = tx.Rollback(ctx)
	got := mustClaim(t, st, claimReq(k, fp("a"), longLease, longTTL))
	wantState(t, got, idemrt.Acquired)
	if got.TakenOver {
		t.Error("the failed transaction left a record behind")
	}
}
