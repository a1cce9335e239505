package storekit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/storekit"
)

// table is a sweepable table of n deletable rows; calls records the limits
// it was asked for.
type table struct {
	n     int
	calls []int
	err   error
}

func (tb *table) sweep(_ context.Context, limit int32) (int64, error) {
	tb.calls = append(tb.calls, int(limit))
	if tb.err != nil {
		return 0, tb.err
	}
	d := min(int(limit), tb.n)
	tb.n -= d
	return int64(d), nil
}

func TestSweep(t *testing.T) {
	ctx := context.Background()
	keys, processed := &table{n: 3}, &table{n: 10}
	var gotRetention time.Duration
	proc := func(ctx context.Context, limit int32, retention time.Duration) (int64, error) {
		gotRetention = retention
		return processed.sweep(ctx, limit)
	}
	n, err := storekit.Sweep(ctx, 5, time.Hour, keys.sweep, proc)
	if err != nil || n != 5 || keys.n != 0 || processed.n != 8 || gotRetention != time.Hour {
		t.Fatalf("Sweep(5) = %d, %v; left %d keys, %d processed (retention %v); want 5: 3 keys, then 2 processed ids", n, err, keys.n, processed.n, gotRetention)
	}
	if keys.calls[0] != 5 || processed.calls[0] != 2 {
		t.Errorf("limits asked: keys %v, processed %v; want 5 then what is left, 2", keys.calls, processed.calls)
	}

	// A full batch of records leaves the processed ids for the next call.
	keys, processed = &table{n: 10}, &table{n: 10}
	if n, err := storekit.Sweep(ctx, 4, time.Hour, keys.sweep, proc); n != 4 || err != nil || len(processed.calls) != 0 {
		t.Errorf("a full batch of records: %d, %v, processed asked %v; want 4 and no processed sweep", n, err, processed.calls)
	}

	// Retention zero or less keeps the processed ids.
	for _, r := range []time.Duration{0, -time.Second} {
		keys, processed = &table{n: 1}, &table{n: 10}
		if n, err := storekit.Sweep(ctx, 4, r, keys.sweep, proc); n != 1 || err != nil || len(processed.calls) != 0 {
			t.Errorf("retention %v: %d, %v, processed asked %v; want 1 and no processed sweep", r, n, err, processed.calls)
		}
	}

	// No limit, nothing asked; a huge limit is bounded.
	keys = &table{n: 10}
	if n, err := storekit.Sweep(ctx, 0, time.Hour, keys.sweep, proc); n != 0 || err != nil || len(keys.calls) != 0 {
		t.Errorf("limit 0: %d, %v, keys asked %v", n, err, keys.calls)
	}
	keys, processed = &table{}, &table{}
	storekit.Sweep(ctx, 1<<40, time.Hour, keys.sweep, proc)
	if keys.calls[0] != storekit.MaxSweep {
		t.Errorf("a huge limit asked the keys for %d, want MaxSweep", keys.calls[0])
	}

	// Errors say which table failed; the records deleted before count.
	boom := errors.New("boom")
	keys = &table{err: boom}
	if _, err := storekit.Sweep(ctx, 4, time.Hour, keys.sweep, proc); !errors.Is(err, boom) || !strings.Contains(err.Error(), "sweep: boom") {
		t.Errorf("records failing: %v", err)
	}
	keys, processed = &table{n: 1}, &table{err: boom}
	if n, err := storekit.Sweep(ctx, 4, time.Hour, keys.sweep, proc); n != 1 || !errors.Is(err, boom) || !strings.Contains(err.Error(), "processed ids") {
		t.Errorf("processed ids failing: %d, %v; want 1 and the error", n, err)
	}
}
