package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// storeBound is the context of one bounded store call (Options.StoreTimeout):
// a child of the request's context that also ends at its deadline. It does
// what context.WithTimeout does for a store call, at a fraction of the cost:
//
//   - it is one allocation, and its timer comes from a pool (boundTimers);
//   - it does not register with the request's context while the call is
//     young. Most calls end within boundWatch, and registering (a map in
//     net/http's request context, its lock, its Done channel, for every
//     call) was most of WithTimeout's cost. A call still running at
//     boundWatch registers then, so from that point the request's end ends
//     it at once; before it, Err and a first Done see the request's end at
//     once, and a Done already handed out closes at boundWatch at the
//     latest;
//   - it implements AfterFunc, so that a driver's context.WithCancel or
//     context.AfterFunc on it registers here instead of starting a
//     goroutine (context's afterFuncer).
//
// The engine ends it with release once the call returned.
type storeBound struct {
	parent   context.Context
	deadline time.Time
	timer    *boundTimer // the pooled timer, until release
	ending
	// Set once the call outlived boundWatch: the registration with the
	// parent, and the timer of the deadline.
	unwatch func() bool
	expiry  *time.Timer
}

// ending is what storeBound and txBound share: the end of a context, its
// Done channel and its AfterFunc functions, under mu.
type ending struct {
	mu   sync.Mutex
	done chan struct{} // made by the first Done; closed when it ends
	err  error         // why it ended; nil until then
	// afters are AfterFunc's functions, nil once stopped.
	afters   []func()
	afterBuf [2]func()
}

// endLocked ends e with err, unless it has ended already (false): Done
// closes, and the functions of AfterFunc start. e.mu is held.
func (e *ending) endLocked(err error) bool {
	if e.err != nil {
		return false
	}
	e.err = err
	if e.done == nil {
		e.done = closedChan
	} else {
		close(e.done)
	}
	for i, f := range e.afters {
		if f != nil {
			e.afters[i] = nil
			go f()
		}
	}
	return true
}

// doneLocked is Done's channel, and whether it was made by this call.
// e.mu is held.
func (e *ending) doneLocked() (chan struct{}, bool) {
	if e.done != nil {
		return e.done, false
	}
	e.done = make(chan struct{})
	return e.done, true
}

// AfterFunc is context.AfterFunc on the context (context's afterFuncer):
// f runs in its own goroutine once it ends; stop keeps f from running.
func (e *ending) AfterFunc(f func()) (stop func() bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		go f()
		return func() bool { return false }
	}
	if e.afters == nil {
		e.afters = e.afterBuf[:0]
	}
	i := len(e.afters)
	e.afters = append(e.afters, f)
	return func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		stopped := e.afters[i] != nil
		e.afters[i] = nil
		return stopped
	}
}

// boundWatch is how long a store call runs before its context registers
// with the request's (see storeBound).
const boundWatch = 5 * time.Millisecond

// closedChan is the Done of a bound that ended before anyone asked for it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// boundTimer is a reusable timer for storeBound and txBound: it runs tick
// on the bound it is armed for (cur or tx). A timer that fires as it is
// being reused may tick the next bound early, which is harmless: tick ends
// a bound only past its deadline.
type boundTimer struct {
	t   *time.Timer
	cur atomic.Pointer[storeBound]
	tx  atomic.Pointer[txBound]
}

var boundTimers = sync.Pool{New: func() any {
	bt := &boundTimer{}
	bt.t = time.AfterFunc(time.Hour, bt.fire)
	bt.t.Stop()
	return bt
}}

func (bt *boundTimer) fire() {
	if b := bt.cur.Load(); b != nil {
		b.tick()
	}
	if b := bt.tx.Load(); b != nil {
		b.tick()
	}
}

// put stops bt and returns it to the pool. Its bound no longer ticks:
// only the bound that took bt from the pool has set it, so it is the one
// cleared here.
func (bt *boundTimer) put() {
	bt.cur.Store(nil)
	bt.tx.Store(nil)
	bt.t.Stop()
	boundTimers.Put(bt)
}

// newStoreBound bounds a store call made with parent to d.
func newStoreBound(parent context.Context, d time.Duration) *storeBound {
	now := time.Now()
	b := &storeBound{parent: parent, deadline: now.Add(d)}
	if pd, ok := parent.Deadline(); ok && pd.Before(b.deadline) {
		b.deadline = pd
	}
	bt := boundTimers.Get().(*boundTimer)
	bt.cur.Store(b)
	bt.t.Reset(min(b.deadline.Sub(now), boundWatch))
	b.timer = bt
	return b
}

// tick runs at boundWatch (or at the deadline, when it comes first): it
// ends b past its deadline, else registers b with its parent and arms the
// deadline's own timer.
func (b *storeBound) tick() {
	left := time.Until(b.deadline)
	if left <= 0 {
		b.expire()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.unwatch != nil {
		return
	}
	b.unwatch = context.AfterFunc(b.parent, b.parentDone)
	b.expiry = time.AfterFunc(left, b.expire)
}

func (b *storeBound) expire() {
	if err := b.parent.Err(); err != nil {
		b.end(err)
		return
	}
	b.end(context.DeadlineExceeded)
}

func (b *storeBound) parentDone() { b.end(b.parent.Err()) }

// release ends b once its call returned, and returns its timer to the
// pool. A nil b (an unbounded call) has nothing to release.
func (b *storeBound) release() {
	if b == nil {
		return
	}
	if bt := b.timer; bt != nil {
		b.timer = nil
		bt.put()
	}
	b.end(context.Canceled)
}

// end ends b with err, unless it has ended already.
func (b *storeBound) end(err error) {
	b.mu.Lock()
	if !b.endLocked(err) {
		b.mu.Unlock()
		return
	}
	unwatch, expiry := b.unwatch, b.expiry
	b.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	if expiry != nil {
		expiry.Stop()
	}
}

func (b *storeBound) Deadline() (time.Time, bool) { return b.deadline, true }

func (b *storeBound) Done() <-chan struct{} {
	b.mu.Lock()
	d, made := b.doneLocked()
	b.mu.Unlock()
	if made && b.parent.Err() != nil {
		b.parentDone()
	}
	return d
}

func (b *storeBound) Err() error {
	b.mu.Lock()
	err := b.err
	b.mu.Unlock()
	if err == nil && b.parent.Err() != nil {
		b.parentDone()
		b.mu.Lock()
		err = b.err
		b.mu.Unlock()
	}
	return err
}

func (b *storeBound) Value(key any) any { return b.parent.Value(key) }

func (b *storeBound) String() string {
	return "idemrt.storeBound(" + b.deadline.String() + ")"
}
