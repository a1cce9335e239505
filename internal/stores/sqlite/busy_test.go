package sqlite

import (
	"context"
	"database/sql"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestWritesOutwaitBusyTimeout: another writer (another process, a long
// sweep) holds SQLite's write lock for many times the store connection's
// busy_timeout. The store's autocommit writes (a claim, a completion, a
// release, a sweep) must wait for it as long as their context lasts, not
// fail with SQLITE_BUSY once busy_timeout has passed: on a CPU-starved
// server SQLite's busy handler, which polls with sleeps, can miss a write
// lock that was free many times, and the caller's deadline
// (Options.StoreTimeout, a sweeper's) is the wait it asked for. Before,
// each of these failed with "database is locked (5) (SQLITE_BUSY)".
func TestWritesOutwaitBusyTimeout(t *testing.T) {
	db := newTestDB(t)
	// The store's connections give up on the lock after 20 ms.
	conn, err := sql.Open("sqlite", "file:"+db.path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(20)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := NewStore(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	holder := db.open(t)
	key := idemrt.RecordKey{Scope: "busy", Key: t.Name()}
	claim := idemrt.ClaimRequest{RecordKey: key, Lease: time.Minute, TTL: time.Hour}
	var epoch int64
	for _, w := range []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"claim", func(ctx context.Context) error {
			res, err := st.Claim(ctx, claim)
			if err == nil && res.State != idemrt.Acquired {
				t.Errorf("claim: %+v", res)
			}
			epoch = res.Epoch
			return err
		}},
		{"release", func(ctx context.Context) error { return st.Release(ctx, key, epoch) }},
		{"claim again", func(ctx context.Context) error {
			res, err := st.Claim(ctx, claim)
			epoch = res.Epoch
			return err
		}},
		{"complete", func(ctx context.Context) error {
			return st.Complete(ctx, idemrt.Completion{RecordKey: key, Epoch: epoch, TTL: time.Hour})
		}},
		{"sweep", func(ctx context.Context) error { _, err := st.Sweep(ctx, 10); return err }},
	} {
		// The holder takes the write lock, and gives it up only once the
		// write has been waiting for 25 times its busy_timeout (not a
		// synchronisation: if the write came later, it would find the
		// lock free and the case would pass without testing anything).
		tx, err := holder.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO effects (id, worker) VALUES ('lock', 'holder')"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		done := make(chan error, 1)
		go func() { done <- w.write(ctx) }()
		select {
		case err := <-done:
			t.Errorf("%s: returned while another writer held the lock: %v", w.name, err)
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(500 * time.Millisecond):
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("%s: %v", w.name, err)
			}
		}
		cancel()
	}

	// Without a deadline, busy_timeout still bounds the write.
	tx, err := holder.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("INSERT INTO effects (id, worker) VALUES ('lock', 'holder')"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "busy", Key: "no-deadline"}, Lease: time.Minute, TTL: time.Hour}); !isBusy(err) {
		t.Errorf("claim without a deadline while another writer held the lock: %v, want SQLITE_BUSY", err)
	}
}
