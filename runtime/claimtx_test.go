package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// claimTxStore is a ClaimTxStore over the MemoryStore that counts what the
// engine asks of it. Its BeginClaim claims in the MemoryStore (where other
// attempts see it in progress, as a database's lock would make them) and a
// rollback of the claiming transaction gives the record up without the
// engine's help, as a database's rollback of the uncommitted record does.
type claimTxStore struct {
	*idemrt.MemoryStore
	commitErr                                    error
	begins, claims, commits, rollbacks, releases atomic.Int64
	completes                                    atomic.Int64
}

func (s *claimTxStore) Claim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	s.claims.Add(1)
	return s.MemoryStore.Claim(ctx, req)
}

func (s *claimTxStore) Complete(ctx context.Context, c idemrt.Completion) error {
	s.completes.Add(1)
	return s.MemoryStore.Complete(ctx, c)
}

func (s *claimTxStore) Release(ctx context.Context, k idemrt.RecordKey, epoch int64) error {
	s.releases.Add(1)
	return s.MemoryStore.Release(ctx, k, epoch)
}

func (s *claimTxStore) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	s.begins.Add(1)
	res, err := s.MemoryStore.Claim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		return nil, res, err
	}
	tx, err := s.MemoryStore.BeginTx(ctx)
	if err != nil {
		return nil, idemrt.ClaimResult{}, err
	}
	return &claimTx{Tx: tx, s: s, key: req.RecordKey, epoch: res.Epoch, ctx: ctx}, res, nil
}

type claimTx struct {
	idemrt.Tx
	s     *claimTxStore
	key   idemrt.RecordKey
	epoch int64
	ctx   context.Context
	done  bool
}

func (t *claimTx) Commit(ctx context.Context) error {
	if t.s.commitErr != nil {
		_ = t.Rollback(ctx)
		return t.s.commitErr
	}
	t.s.commits.Add(1)
	t.done = true
	return t.Tx.Commit(ctx)
}

func (t *claimTx) Rollback(ctx context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	t.s.rollbacks.Add(1)
	_ = t.Tx.Rollback(ctx)
	return t.s.MemoryStore.Release(context.Background(), t.key, t.epoch)
}

var _ idemrt.ClaimTxStore = (*claimTxStore)(nil)

// A first request is one BeginClaim and one commit: no separate claim,
// completion or release; the replay is answered from BeginClaim's read.
func TestClaimTxCommitsOnce(t *testing.T) {
	st := &claimTxStore{MemoryStore: idemrt.NewMemoryStore()}
	var sawTx bool
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		_, sawTx = idemrt.TxFromContext(r.Context())
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "created")
	}}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	if w := do(srv, req{key: "k", body: `{}`}); w.Code != 201 || w.Body.String() != "created" {
		t.Fatalf("first %d %q", w.Code, w.Body)
	}
	if !sawTx {
		t.Fatal("TxFromContext found no transaction in the handler")
	}
	if st.begins.Load() != 1 || st.commits.Load() != 1 || st.claims.Load() != 0 || st.completes.Load() != 0 || st.releases.Load() != 0 {
		t.Fatalf("begins %d commits %d claims %d completes %d releases %d; want one BeginClaim and one commit",
			st.begins.Load(), st.commits.Load(), st.claims.Load(), st.completes.Load(), st.releases.Load())
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != "created" {
		t.Fatalf("replay %d %q", w.Code, w.Body)
	}
	if h.calls.Load() != 1 || st.begins.Load() != 2 || st.commits.Load() != 1 {
		t.Fatalf("calls %d begins %d commits %d after the replay", h.calls.Load(), st.begins.Load(), st.commits.Load())
	}
}

// A response outside save, a panic and a failed commit roll the attempt
// back whole: the engine releases nothing (the rollback took the claim
// with it) and the retry runs at once.
func TestClaimTxRollbackNeedsNoRelease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		panics    bool
		commitErr error
		want      int
	}{
		{name: "outside save", status: 500, want: 500},
		{name: "panic", panics: true},
		{name: "commit fails", status: 201, commitErr: errors.New("connection reset"), want: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &claimTxStore{MemoryStore: idemrt.NewMemoryStore(), commitErr: tc.commitErr}
			var released atomic.Int64
			h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
				if tc.panics {
					panic("boom")
				}
				w.WriteHeader(tc.status)
			}}
			srv := wrap(t, idemrt.Options{Store: st, Hooks: idemrt.Hooks{Released: func(context.Context, idemrt.Event) { released.Add(1) }}}, txPolicy(), h)
			send := func() int {
				defer func() { _ = recover() }()
				return do(srv, req{key: "k", body: `{}`}).Code
			}
			if got := send(); !tc.panics && got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if st.rollbacks.Load() != 1 || st.releases.Load() != 0 || st.commits.Load() != 0 {
				t.Fatalf("rollbacks %d releases %d commits %d; want one rollback and no release", st.rollbacks.Load(), st.releases.Load(), st.commits.Load())
			}
			if released.Load() != 1 {
				t.Fatalf("Released hook fired %d times, want 1", released.Load())
			}
			send()
			if h.calls.Load() != 2 {
				t.Fatalf("handler ran %d times, want the retry to run at once", h.calls.Load())
			}
		})
	}
}

// The lease bounds an attempt: the handler's context ends with it, and an
// attempt that returns after it is rolled back and answered 503.
func TestClaimTxLeaseBoundsHandler(t *testing.T) {
	st := &claimTxStore{MemoryStore: idemrt.NewMemoryStore()}
	var deadline time.Time
	var hasDeadline bool
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		deadline, hasDeadline = r.Context().Deadline()
		<-r.Context().Done()
		w.WriteHeader(201)
	}}
	p := txPolicy()
	p.Lease = 200 * time.Millisecond
	p.TTL = time.Hour
	srv := wrap(t, idemrt.Options{Store: st}, p, h)
	start := time.Now()
	w := do(srv, req{key: "k", body: `{}`})
	end := time.Now()
	wantProblem(t, w, 503, idemrt.ProblemStoreUnavailable)
	// The claim happened between start and end: its lease ends between
	// start and end plus the lease (no margin to guess on a slow machine).
	if !hasDeadline || deadline.Before(start.Add(p.Lease)) || deadline.After(end.Add(p.Lease)) {
		t.Fatalf("handler's deadline %v (set %v), want the lease from the claim, between %v and %v", deadline, hasDeadline, start.Add(p.Lease), end.Add(p.Lease))
	}
	if st.rollbacks.Load() != 1 || st.commits.Load() != 0 {
		t.Fatalf("rollbacks %d commits %d", st.rollbacks.Load(), st.commits.Load())
	}
}

// BeginClaim's result and transaction must agree; a store that breaks
// that is a store error, never a handler run.
func TestClaimTxMismatchedResult(t *testing.T) {
	st := &badClaimTx{claimTxStore{MemoryStore: idemrt.NewMemoryStore()}}
	h := &counting{}
	srv := wrap(t, idemrt.Options{Store: st}, txPolicy(), h)
	wantProblem(t, do(srv, req{key: "k", body: `{}`}), 503, idemrt.ProblemStoreUnavailable)
	if h.calls.Load() != 0 {
		t.Fatal("handler ran")
	}
}

type badClaimTx struct{ claimTxStore }

func (s *badClaimTx) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	_, res, err := s.claimTxStore.BeginClaim(ctx, req)
	return nil, res, err // Acquired without a transaction
}
