package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func TestProcessOnceRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	st := idemrt.NewMemoryStore()
	fn := func(context.Context) error { t.Error("fn ran"); return nil }
	for name, call := range map[string]func() (bool, error){
		"nil store":     func() (bool, error) { return idemrt.ProcessOnce(ctx, nil, "c", "m", fn) },
		"nil fn":        func() (bool, error) { return idemrt.ProcessOnce(ctx, st, "c", "m", nil) },
		"no consumer":   func() (bool, error) { return idemrt.ProcessOnce(ctx, st, "", "m", fn) },
		"no message id": func() (bool, error) { return idemrt.ProcessOnce(ctx, st, "c", "", fn) },
	} {
		if ran, err := call(); ran || err == nil {
			t.Errorf("%s: ProcessOnce = %v, %v; want an error", name, ran, err)
		}
	}
}

// failingCommit is a store whose commits fail: ProcessOnce reports the
// failure (the message must not be acknowledged) and ran=false.
type failingCommit struct{ *idemrt.MemoryStore }

func (s failingCommit) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	tx, err := s.MemoryStore.BeginTx(ctx)
	return commitFails{tx}, err
}

func (s failingCommit) MarkProcessed(ctx context.Context, tx idemrt.Tx, consumer, id string) (bool, error) {
	return s.MemoryStore.MarkProcessed(ctx, tx.(commitFails).Tx, consumer, id)
}

type commitFails struct{ idemrt.Tx }

func (commitFails) Commit(context.Context) error { return errors.New("connection lost") }

func TestProcessOnceCommitFailure(t *testing.T) {
	st := failingCommit{idemrt.NewMemoryStore()}
	ran, err := idemrt.ProcessOnce(context.Background(), st, "c", "m", func(context.Context) error { return nil })
	if ran || err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("ProcessOnce = %v, %v; want false and the commit's error", ran, err)
	}
	// The memory transaction was rolled back: the id is free again.
	ran, err = idemrt.ProcessOnce(context.Background(), st.MemoryStore, "c", "m", func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("after the failed commit: ProcessOnce = %v, %v; want true, nil", ran, err)
	}
}

func TestProcessedRetention(t *testing.T) {
	st := idemrt.NewMemoryStore()
	now := time.Unix(1_700_000_000, 0)
	st.SetClock(func() time.Time { return now })
	st.SetProcessedRetention(time.Hour)
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	if ran, err := idemrt.ProcessOnce(ctx, st, "c", "m", noop); !ran || err != nil {
		t.Fatal(ran, err)
	}
	if n, _ := st.Sweep(ctx, 10); n != 0 || st.ProcessedLen() != 1 {
		t.Fatalf("swept %d within the retention", n)
	}
	now = now.Add(time.Hour)
	if n, _ := st.Sweep(ctx, 10); n != 1 || st.ProcessedLen() != 0 {
		t.Fatalf("swept %d after the retention, want 1", n)
	}
	// A redelivery after the retention runs again (docs/messaging.md).
	if ran, err := idemrt.ProcessOnce(ctx, st, "c", "m", noop); !ran || err != nil {
		t.Fatalf("redelivery after the retention: %v, %v; want it to run", ran, err)
	}
}
