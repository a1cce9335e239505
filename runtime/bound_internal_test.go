package runtime

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// ended waits up to within for ctx to end, and returns its error.
func ended(t *testing.T, ctx context.Context, within time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(within):
		t.Fatalf("context not done after %v", within)
		return nil
	}
}

// A store call's bound is a context like context.WithTimeout's: it ends at
// its deadline (the parent's, when that is sooner), when its parent ends,
// or when it is released, and Err and Done agree.
func TestStoreBoundEnds(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		b := newStoreBound(context.Background(), 30*time.Millisecond)
		defer b.release()
		if dl, ok := b.Deadline(); !ok || dl.Sub(start) < 30*time.Millisecond || dl.Sub(start) > time.Second {
			t.Errorf("Deadline %v %v, want about 30ms from now", dl.Sub(start), ok)
		}
		if err := b.Err(); err != nil && time.Since(start) < 30*time.Millisecond {
			t.Fatalf("Err before the deadline: %v", err)
		}
		if err := ended(t, b, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("ended after %v, before its deadline", d)
		}
	})
	t.Run("parent deadline sooner", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		b := newStoreBound(parent, time.Hour)
		defer b.release()
		if dl, _ := b.Deadline(); !dl.Equal(must(parent.Deadline())) {
			t.Errorf("Deadline %v, want the parent's %v", dl, must(parent.Deadline()))
		}
		if err := ended(t, b, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err %v, want DeadlineExceeded", err)
		}
	})
	for _, after := range []time.Duration{0, time.Millisecond, 3 * boundWatch} {
		t.Run("parent cancelled after "+after.String(), func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			b := newStoreBound(parent, time.Hour)
			defer b.release()
			done := b.Done() // handed out before the parent ends
			time.Sleep(after)
			cancel()
			// Err sees the parent's end at once; Done within boundWatch.
			if err := b.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("Err right after the parent's cancel: %v", err)
			}
			select {
			case <-done:
			case <-time.After(boundWatch + 2*time.Second):
				t.Fatal("Done not closed after the parent's cancel")
			}
		})
	}
	t.Run("parent cancelled, waiting on Done alone", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		b := newStoreBound(parent, time.Hour)
		defer b.release()
		done := b.Done()
		cancel()
		select {
		case <-done:
		case <-time.After(boundWatch + 2*time.Second):
			t.Fatal("Done not closed after the parent's cancel")
		}
		if err := b.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err %v", err)
		}
	})
	t.Run("parent already cancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		cancel()
		b := newStoreBound(parent, time.Hour)
		defer b.release()
		select {
		case <-b.Done():
		default:
			t.Fatal("a bound of an ended context is not done")
		}
	})
	t.Run("released", func(t *testing.T) {
		b := newStoreBound(context.Background(), time.Hour)
		done := b.Done()
		b.release()
		closes(t, done, "Done after release")
		if err := b.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err after release: %v", err)
		}
		b.release() // twice: no effect
	})
}

// closes waits up to 5 s for ch to close.
func closes(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not after 5s", what)
	}
}

func must(t time.Time, _ bool) time.Time { return t }

// Drivers derive contexts from the bound (database/sql's WithCancel for
// every query, pgx's AfterFunc): they register with the bound itself,
// without a goroutine each, and end with it.
func TestStoreBoundChildren(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newStoreBound(parent, time.Hour)
	child, cancelChild := context.WithCancel(b)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(b, func() { close(ran) })
	stopped := context.AfterFunc(b, func() { t.Error("a stopped AfterFunc ran") })
	b.mu.Lock()
	n := len(b.afters)
	b.mu.Unlock()
	if n != 3 {
		t.Errorf("%d functions registered with the bound, want 3 (WithCancel and two AfterFunc)", n)
	}
	if !stopped() || stopped() {
		t.Error("stop: want true, then false")
	}
	cancel()
	if err := ended(t, child, boundWatch+5*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("child: %v", err)
	}
	closes(t, ran, "an AfterFunc of the bound")
	b.release()
	late := make(chan struct{})
	if context.AfterFunc(b, func() { close(late) })() {
		t.Error("stop of an AfterFunc registered after the end returned true")
	}
	closes(t, late, "an AfterFunc registered after the end")
}

// A tick before the deadline (a pooled timer reused while it fired) does
// not end the bound; it registers it with its parent.
func TestStoreBoundEarlyTick(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	b := newStoreBound(parent, time.Hour)
	defer b.release()
	done := b.Done()
	b.tick()
	b.tick()
	if err := b.Err(); err != nil {
		t.Fatalf("an early tick ended the bound: %v", err)
	}
	cancel()
	if err := ended(t, b, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Err %v", err)
	}
	closes(t, done, "Done")
}

// Many bounds at once, on shared pooled timers, with short deadlines and
// parents cancelled at random: none ends before its deadline unless its
// parent ended or it was released, and each ends with the right error.
func TestStoreBoundConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				parent, cancel := context.WithCancel(context.Background())
				d := time.Duration(r.IntN(4000)) * time.Microsecond
				start := time.Now()
				b := newStoreBound(parent, d)
				done := b.Done()
				_ = context.AfterFunc(b, func() {})
				switch r.IntN(3) {
				case 0: // the call outlives its bound
					select {
					case <-done:
					case <-time.After(5 * time.Second):
						t.Errorf("bound %v not done after 5s", d)
					}
					if err := b.Err(); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < d {
						t.Errorf("bound %v: %v after %v", d, err, time.Since(start))
					}
				case 1: // the client goes away
					cancel()
					select {
					case <-done:
					case <-time.After(boundWatch + 5*time.Second):
						t.Errorf("bound of a cancelled parent not done")
					}
					if err := b.Err(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("parent cancelled: %v", err)
					}
				default: // the call returns
					if err := b.Err(); err != nil && time.Since(start) < d {
						t.Errorf("bound %v ended after %v: %v", d, time.Since(start), err)
					}
				}
				b.release()
				cancel()
			}
		}()
	}
	wg.Wait()
}
