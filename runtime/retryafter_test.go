package runtime_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// hiddenLease is a ClaimTxStore that, like the generated SQL stores,
// cannot see another attempt's uncommitted record: BeginClaim reports it
// InProgress without LeaseRemaining.
type hiddenLease struct{ *claimTxStore }

func (s hiddenLease) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	tx, res, err := s.claimTxStore.BeginClaim(ctx, req)
	if res.State == idemrt.InProgress {
		res.LeaseRemaining = 0
	}
	return tx, res, err
}

// A duplicate of a one-commit attempt gets a Retry-After that reflects
// the attempt's remaining lease (it got 1 while 8 s were left).
func TestRetryAfterOfOneCommitAttempt(t *testing.T) {
	store := hiddenLease{&claimTxStore{MemoryStore: idemrt.NewMemoryStore()}}
	started, release := make(chan struct{}), make(chan struct{})
	h := &counting{}
	h.fn = func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.WriteHeader(http.StatusCreated)
	}
	srv := wrap(t, idemrt.Options{Store: store}, policy(func(p *idemrt.Policy) {
		p.Transactional, p.Lease, p.TTL = true, 10*time.Second, time.Hour
	}), h)
	done := make(chan int)
	go func() { done <- do(srv, req{key: "k", body: `{}`}).Code }()
	<-started
	time.Sleep(1100 * time.Millisecond) // the lease has about 8.9 s left
	w := do(srv, req{key: "k", body: `{}`})
	close(release)
	wantProblem(t, w, http.StatusConflict, idemrt.ProblemInProgress)
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra < 8 || ra > 9 {
		t.Errorf("Retry-After %q while the lease has about 8.9 s left; want 8 or 9", w.Header().Get("Retry-After"))
	}
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("first attempt: %d", code)
	}
	// Once the attempt is over, nothing of it is left behind: a later
	// duplicate of another attempt of the same key is measured afresh.
	if w := do(srv, req{key: "k", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after the attempt: %d %s", w.Code, w.Body)
	}
}
