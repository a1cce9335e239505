package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Claimed fires once per first request, before the handler runs, and not
// for replays, mismatches or takeovers (TakenOver reports those).
func TestClaimedHook(t *testing.T) {
	st := idemrt.NewMemoryStore()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { return now })
	var events []string
	h := &counting{}
	hooks := idemrt.Hooks{
		Claimed: func(_ context.Context, e idemrt.Event) {
			if h.calls.Load() != 0 && e.Key == "a" {
				t.Errorf("Claimed after the handler ran")
			}
			events = append(events, "claimed:"+e.Key)
		},
		TakenOver: func(_ context.Context, e idemrt.Event) { events = append(events, "takenover:"+e.Key) },
		Replayed:  func(_ context.Context, e idemrt.Event) { events = append(events, "replayed:"+e.Key) },
		Mismatch:  func(_ context.Context, e idemrt.Event) { events = append(events, "mismatch:"+e.Key) },
	}
	// An in-progress record whose lease then ends: the next request takes it over.
	if _, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createOrder", Key: "b"}, Lease: time.Second, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	srv := wrap(t, idemrt.Options{Store: st, Hooks: hooks}, policy(), h)
	do(srv, req{key: "a", body: `{}`})
	do(srv, req{key: "a", body: `{}`})
	do(srv, req{key: "a", body: `{"other":1}`})
	do(srv, req{key: "b", body: `{}`})
	got := strings.Join(events, ",")
	if want := "claimed:a,replayed:a,mismatch:a,takenover:b"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}
