package runtime

import (
	"context"
	"testing"
	"time"
)

type slowPublisher time.Duration

func (d slowPublisher) Publish(ctx context.Context, ev OutboxEvent) error {
	time.Sleep(time.Duration(d))
	return nil
}

// TestRelayBookkeepingAfterLongPublishing: a batch whose publishing takes
// longer than the bookkeeping bound (well within its lease: a slow broker,
// a large batch) is still marked sent. Counted from before publishing, the
// bound had ended by the time MarkSent ran, which then failed every round:
// the batch was published again each time its lease ended, for ever.
func TestRelayBookkeepingAfterLongPublishing(t *testing.T) {
	defer func(d time.Duration) { relayBookkeeping = d }(relayBookkeeping)
	relayBookkeeping = 50 * time.Millisecond
	st := NewMemoryStore()
	ctx := context.Background()
	tx, err := st.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddEvents(ctx, tx, OutboxEvent{ID: "a", Topic: "t", Key: "K"}, OutboxEvent{ID: "b", Topic: "t", Key: "K"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := &Relay{Store: st, Publisher: slowPublisher(2 * relayBookkeeping), Lease: time.Minute}
	if n, err := r.RunOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want 2 events published and marked sent", n, err)
	}
	if total, unsent := st.OutboxLen(); total != 2 || unsent != 0 {
		t.Errorf("outbox holds %d events, %d unsent; want both marked sent", total, unsent)
	}
}
