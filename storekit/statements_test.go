package storekit_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/storekit"
)

// The helpers that run a store's statements: what they pass the statement,
// and how they read its answer.

var errBoom = errors.New("boom")

func TestComplete(t *testing.T) {
	key := idemrt.RecordKey{Scope: "op", Key: "k"}
	c := idemrt.Completion{RecordKey: key, Epoch: 7, Response: &idemrt.SavedResponse{Status: 201, Body: []byte("hi")}}
	var got storekit.Completion
	if err := storekit.Complete(c, func(cp storekit.Completion) (int64, error) { got = cp; return 1, nil }); err != nil {
		t.Fatalf("one row completed: %v", err)
	}
	if got.Status != 201 || string(got.Body) != "hi" || got.Tombstone {
		t.Errorf("the statement was given %+v, want c's response encoded", got)
	}
	if err := storekit.Complete(c, func(storekit.Completion) (int64, error) { return 0, nil }); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("no row completed: %v, want ErrFenced", err)
	}
	if err := storekit.Complete(c, func(storekit.Completion) (int64, error) { return 0, errBoom }); !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "complete: boom") {
		t.Errorf("the statement failing: %v", err)
	}
	called := false
	bad := idemrt.Completion{RecordKey: idemrt.RecordKey{Scope: "op"}}
	if err := storekit.Complete(bad, func(storekit.Completion) (int64, error) { called = true; return 1, nil }); err == nil || called {
		t.Errorf("an empty key: %v, statement run %v; want an error before the statement", err, called)
	}
}

func TestRelease(t *testing.T) {
	key := idemrt.RecordKey{Scope: "op", Key: "k"}
	if err := storekit.Release(key, func() (int64, error) { return 1, nil }); err != nil {
		t.Errorf("one row released: %v", err)
	}
	if err := storekit.Release(key, func() (int64, error) { return 0, nil }); !errors.Is(err, idemrt.ErrFenced) {
		t.Errorf("no row released: %v, want ErrFenced", err)
	}
	if err := storekit.Release(key, func() (int64, error) { return 0, errBoom }); !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "release: boom") {
		t.Errorf("the statement failing: %v", err)
	}
	called := false
	if err := storekit.Release(idemrt.RecordKey{Key: "k"}, func() (int64, error) { called = true; return 1, nil }); err == nil || called {
		t.Errorf("an empty scope: %v, statement run %v; want an error before the statement", err, called)
	}
}

// row is a claimed row as a store's sqlc type might hold it.
type row struct {
	seq     int64
	id      string
	headers []byte
}

func TestClaimEvents(t *testing.T) {
	ctx := context.Background()
	var gotLimit int64
	var gotLease time.Duration
	claim := func(_ context.Context, limit int64, lease time.Duration) ([]row, error) {
		gotLimit, gotLease = limit, lease
		return []row{{3, "c", nil}, {1, "a", []byte(`{"h":"v"}`)}, {2, "b", []byte{}}}, nil
	}
	event := func(r row) storekit.Event {
		return storekit.Event{Seq: r.seq, EncodedHeaders: r.headers, OutboxEvent: idemrt.OutboxEvent{ID: r.id, Topic: "t"}}
	}
	evs, err := storekit.ClaimEvents(ctx, 10, time.Minute, claim, event)
	if err != nil {
		t.Fatal(err)
	}
	if gotLimit != 10 || gotLease != time.Minute {
		t.Errorf("claim asked for %d events for %v, want 10 for 1m", gotLimit, gotLease)
	}
	want := []idemrt.OutboxEvent{
		{ID: "a", Topic: "t", Headers: map[string]string{"h": "v"}},
		{ID: "b", Topic: "t"},
		{ID: "c", Topic: "t"},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events = %+v, want %+v (in seq order, headers decoded)", evs, want)
	}

	if _, err := storekit.ClaimEvents(ctx, 1<<40, time.Minute, claim, event); err != nil || gotLimit != storekit.MaxClaimEvents {
		t.Errorf("a huge limit: %v, claim asked for %d; want MaxClaimEvents", err, gotLimit)
	}
	gotLimit = 0
	if _, err := storekit.ClaimEvents(ctx, 0, time.Minute, claim, event); err == nil || gotLimit != 0 {
		t.Errorf("limit 0: %v, claim asked for %d; want an error and no claim", err, gotLimit)
	}
	failing := func(context.Context, int64, time.Duration) ([]row, error) { return nil, errBoom }
	if _, err := storekit.ClaimEvents(ctx, 1, time.Minute, failing, event); !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "claim events: boom") {
		t.Errorf("the claim failing: %v", err)
	}
	corrupt := func(context.Context, int64, time.Duration) ([]row, error) { return []row{{1, "a", []byte("{")}}, nil }
	if _, err := storekit.ClaimEvents(ctx, 1, time.Minute, corrupt, event); err == nil {
		t.Error("corrupt headers: no error")
	}
}

func TestMarkSentAndReleaseEvents(t *testing.T) {
	ctx := context.Background()
	for name, run := range map[string]func(context.Context, []string, func(context.Context, []string) (int64, error)) error{
		"MarkSent":      storekit.MarkSent,
		"ReleaseEvents": storekit.ReleaseEvents,
	} {
		var got []string
		calls := 0
		stmt := func(_ context.Context, ids []string) (int64, error) { calls++; got = ids; return 0, nil }
		if err := run(ctx, nil, stmt); err != nil || calls != 0 {
			t.Errorf("%s(no ids) = %v after %d statements; want nil and none", name, err, calls)
		}
		if err := run(ctx, []string{"a", "b"}, stmt); err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Errorf("%s(a, b) = %v, statement given %v", name, err, got)
		}
		fail := func(context.Context, []string) (int64, error) { return 0, errBoom }
		if err := run(ctx, []string{"a"}, fail); !errors.Is(err, errBoom) {
			t.Errorf("%s with the statement failing: %v", name, err)
		}
	}
}

func TestSweepSent(t *testing.T) {
	ctx := context.Background()
	var gotLimit int32
	var gotRetention time.Duration
	sweep := func(_ context.Context, limit int32, retention time.Duration) (int64, error) {
		gotLimit, gotRetention = limit, retention
		return 3, nil
	}
	if n, err := storekit.SweepSent(ctx, time.Hour, 5, sweep); n != 3 || err != nil || gotLimit != 5 || gotRetention != time.Hour {
		t.Errorf("SweepSent(1h, 5) = %d, %v; statement given %d, %v", n, err, gotLimit, gotRetention)
	}
	if _, err := storekit.SweepSent(ctx, time.Hour, 1<<40, sweep); err != nil || gotLimit != storekit.MaxSweep {
		t.Errorf("a huge limit: %v, statement given %d; want MaxSweep", err, gotLimit)
	}
	gotLimit = 0
	if n, err := storekit.SweepSent(ctx, time.Hour, 0, sweep); n != 0 || err != nil || gotLimit != 0 {
		t.Errorf("limit 0: %d, %v, statement given %d; want nothing run", n, err, gotLimit)
	}
	fail := func(context.Context, int32, time.Duration) (int64, error) { return 0, errBoom }
	if _, err := storekit.SweepSent(ctx, time.Hour, 1, fail); !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "sweep sent events: boom") {
		t.Errorf("the statement failing: %v", err)
	}
}
