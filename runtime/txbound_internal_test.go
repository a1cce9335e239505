package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A transaction's context ends at the bound of the call that opens it when
// that call has not returned (begun is false), else not before its lease
// ends or it is released; an early tick of its pooled timer changes
// nothing; it carries the request's values, not its cancellation.
func TestTxBound(t *testing.T) {
	t.Run("bound before begun", func(t *testing.T) {
		start := time.Now()
		b := newTxBound(context.Background(), 20*time.Millisecond, start.Add(time.Hour))
		defer b.release()
		if err := ended(t, b, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err %v", err)
		}
		if took := time.Since(start); took < 20*time.Millisecond {
			t.Fatalf("ended after %v, before the bound", took)
		}
		if b.begun() {
			t.Fatal("begun after the bound ended the context")
		}
	})
	t.Run("lease after begun", func(t *testing.T) {
		start := time.Now()
		lease := start.Add(time.Second)
		b := newTxBound(context.Background(), 20*time.Millisecond, lease)
		defer b.release()
		child, cancel := context.WithCancel(b) // database/sql's, for the transaction
		defer cancel()
		if !b.begun() {
			t.Fatal("begun reported the bound ended")
		}
		b.tick() // early (a pooled timer reused as it fired)
		time.Sleep(30 * time.Millisecond)
		if err := child.Err(); err != nil && time.Now().Before(lease) {
			t.Fatalf("ended at the call's bound after begun: %v", err)
		}
		if err := ended(t, child, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("child Err %v", err)
		}
		if time.Now().Before(lease) {
			t.Fatal("ended before the lease")
		}
		if d, ok := b.Deadline(); !ok || !d.Equal(lease) {
			t.Errorf("Deadline %v %v, want the lease", d, ok)
		}
	})
	t.Run("release, values, no cancellation", func(t *testing.T) {
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), txKey{}, "v"))
		b := newTxBound(parent, 10*time.Millisecond, time.Time{})
		ran := make(chan struct{})
		context.AfterFunc(b, func() { close(ran) })
		if !b.begun() {
			t.Fatal("begun reported the bound ended")
		}
		cancelParent()
		time.Sleep(20 * time.Millisecond)
		if err := b.Err(); err != nil {
			t.Fatalf("ended with the request or the call's bound: %v", err)
		}
		if _, ok := b.Deadline(); ok {
			t.Error("a deadline without a lease")
		}
		if b.Value(txKey{}) != "v" {
			t.Error("the request's values are missing")
		}
		b.release()
		if err := ended(t, b, time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err %v after release", err)
		}
		closes(t, ran, "AfterFunc")
	})
}
