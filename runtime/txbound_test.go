package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// hangingClaimTx is a claimTxStore whose BeginClaim, while hang is set,
// waits as database/sql does on a query: on a child of its context, until
// that ends. Otherwise it keeps a child of the transaction's context as
// database/sql does for the transaction's life (txChild).
type hangingClaimTx struct {
	claimTxStore
	hang    atomic.Bool
	txChild atomic.Pointer[context.Context]
	// txCancel is the child's cancel, which database/sql calls once the
	// transaction is over (here: the test, at its end).
	txCancel atomic.Pointer[context.CancelFunc]
}

func (s *hangingClaimTx) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	child, cancel := context.WithCancel(ctx)
	if s.hang.Load() {
		defer cancel()
		<-child.Done()
		return nil, idemrt.ClaimResult{}, child.Err()
	}
	s.txChild.Store(&child)
	s.txCancel.Store(&cancel)
	return s.claimTxStore.BeginClaim(child, req)
}

// A transactional claim (ClaimTxStore) that hangs ends at StoreTimeout: 503
// and no handler run. One that answers opens a transaction whose context
// outlives the bound (the handler runs in it, longer than StoreTimeout)
// and the client going away: the commit still happens, and the context
// ends once the transaction is over.
func TestStoreTimeoutClaimTx(t *testing.T) {
	const bound = 20 * time.Millisecond
	st := &hangingClaimTx{claimTxStore: claimTxStore{MemoryStore: idemrt.NewMemoryStore()}}
	var txErrInHandler error
	var handlerDeadline time.Time
	h := &counting{fn: func(w http.ResponseWriter, r *http.Request) {
		handlerDeadline, _ = r.Context().Deadline()
		time.Sleep(3 * bound)
		if cancel, ok := r.Context().Value(cancelKey{}).(context.CancelFunc); ok {
			cancel() // the client goes away while the handler runs
		}
		txErrInHandler = (*st.txChild.Load()).Err()
		w.WriteHeader(201)
	}}
	p := txPolicy()
	p.Lease = time.Minute
	srv := wrap(t, idemrt.Options{Store: st, StoreTimeout: bound}, p, h)
	t.Cleanup(func() {
		if cancel := st.txCancel.Load(); cancel != nil {
			(*cancel)()
		}
	})

	st.hang.Store(true)
	start := time.Now()
	w := do(srv, req{key: "k", body: `{}`})
	if took := time.Since(start); took < bound || took > 2*time.Second {
		t.Errorf("a hung BeginClaim answered after %v, want the bound %v", took, bound)
	}
	wantProblem(t, w, http.StatusServiceUnavailable, idemrt.ProblemStoreUnavailable)
	if h.calls.Load() != 0 {
		t.Fatal("the handler ran after a hung claim")
	}

	st.hang.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(context.WithValue(ctx, cancelKey{}, cancel), http.MethodPost, "/orders/1", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	start = time.Now()
	srv.ServeHTTP(rec, r)
	if rec.Code != http.StatusCreated || txErrInHandler != nil {
		t.Fatalf("a handler that outlived the bound: %d %s, its transaction's context ended with %v", rec.Code, rec.Body, txErrInHandler)
	}
	if st.commits.Load() != 1 || st.rollbacks.Load() != 0 {
		t.Fatalf("commits %d rollbacks %d, want the one commit", st.commits.Load(), st.rollbacks.Load())
	}
	if handlerDeadline.Before(start.Add(p.Lease)) || handlerDeadline.After(time.Now().Add(p.Lease)) {
		t.Errorf("handler's deadline %v, want the claim's lease (%v)", handlerDeadline, p.Lease)
	}
	select {
	case <-(*st.txChild.Load()).Done():
	case <-time.After(time.Second):
		t.Fatal("the transaction's context did not end with the transaction")
	}
	if w := do(srv, req{key: "k", body: `{}`}); w.Header().Get("Idempotent-Replayed") != "true" || h.calls.Load() != 1 {
		t.Fatalf("replay %d, handler runs %d", w.Code, h.calls.Load())
	}
}

type cancelKey struct{}
