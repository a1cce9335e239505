package runtime

import (
	"context"
	"time"
)

// txBound is the context a store transaction is opened with (beginTx,
// beginClaim). The transaction lives past the call that opens it (database/sql
// watches this context for the transaction's whole life), so unlike
// storeBound it does not end when that call returns:
//
//   - it carries the request's values but not its cancellation (bg): a
//     transaction that holds a handler's work must still commit, or roll
//     back, after the client went away;
//   - it ends at the store bound (callEnd) if the call that opens the
//     transaction has not returned by then (begun reports it);
//   - it ends at leaseEnd, when set (the claim's lease: a transaction that
//     holds the claim must not outlive it), and at release.
//
// It is one allocation, its timer comes from boundTimers (armed for the
// sooner of callEnd and leaseEnd, then for leaseEnd alone), and it
// implements AfterFunc, as storeBound does, so that database/sql's child of
// it registers here.
type txBound struct {
	values   context.Context // bg(ctx): the request's values
	leaseEnd time.Time       // zero: none
	callEnd  time.Time       // zero once begun (or unbounded)
	timer    *boundTimer     // the pooled timer, until released
	ending
}

// newTxBound is the context of a transaction opened with ctx's values:
// the call that opens it is bounded to d (0: unbounded), and the
// transaction ends at leaseEnd (zero: not before release).
func newTxBound(ctx context.Context, d time.Duration, leaseEnd time.Time) *txBound {
	b := &txBound{values: bg(ctx), leaseEnd: leaseEnd}
	if d > 0 {
		b.callEnd = time.Now().Add(d)
		if !leaseEnd.IsZero() && leaseEnd.Before(b.callEnd) {
			b.callEnd = leaseEnd
		}
	}
	first := b.callEnd
	if first.IsZero() {
		first = leaseEnd
	}
	if !first.IsZero() {
		bt := boundTimers.Get().(*boundTimer)
		bt.tx.Store(b)
		bt.t.Reset(time.Until(first))
		b.timer = bt
	}
	return b
}

// tick ends b once the call that opens the transaction outlived the store
// bound, or the lease ended. An early tick (see boundTimer) does nothing:
// b's own time is still armed.
func (b *txBound) tick() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if (!b.callEnd.IsZero() && !now.Before(b.callEnd)) || (!b.leaseEnd.IsZero() && !now.Before(b.leaseEnd)) {
		b.endLocked(context.DeadlineExceeded)
	}
}

// begun ends the bound of the call that opened the transaction, which
// returned: from now on b ends at leaseEnd or release. It reports false
// when b ended first (the bound passed as the call returned): a
// transaction opened with b cannot be used.
func (b *txBound) begun() bool {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return false
	}
	wasBounded := !b.callEnd.IsZero()
	b.callEnd = time.Time{}
	b.mu.Unlock()
	switch {
	case !wasBounded:
		// The timer, if any, is armed for leaseEnd already.
	case b.leaseEnd.IsZero():
		b.putTimer()
	default:
		b.timer.t.Reset(time.Until(b.leaseEnd))
	}
	return true
}

// release ends b (the transaction is over, or was never opened) and
// returns its timer to the pool. A nil b has nothing to release.
func (b *txBound) release() {
	if b == nil {
		return
	}
	b.putTimer()
	b.mu.Lock()
	b.endLocked(context.Canceled)
	b.mu.Unlock()
}

func (b *txBound) putTimer() {
	if bt := b.timer; bt != nil {
		b.timer = nil
		bt.put()
	}
}

func (b *txBound) Deadline() (time.Time, bool) { return b.leaseEnd, !b.leaseEnd.IsZero() }

func (b *txBound) Done() <-chan struct{} {
	b.mu.Lock()
	d, _ := b.doneLocked()
	b.mu.Unlock()
	return d
}

func (b *txBound) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *txBound) Value(key any) any { return b.values.Value(key) }

func (b *txBound) String() string {
	return "idemrt.txBound(" + b.leaseEnd.String() + ")"
}
