package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestClaimTxIdleBoundedByLease: a transaction that holds a claim and goes
// idle past its lease (its client vanished without closing the
// connection) is ended by the server (idle_in_transaction_session_timeout,
// set for the transaction by the claim): it cannot commit, and the key is
// free again.
func TestClaimTxIdleBoundedByLease(t *testing.T) {
	st := newTestDB(t).store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "idle")}
	req := idemrt.ClaimRequest{RecordKey: k, Lease: 300 * time.Millisecond, TTL: time.Hour}
	tx, res, err := st.BeginClaim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("BeginClaim: %+v, %v", res, err)
	}
	time.Sleep(time.Second)
	err = tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, Response: &idemrt.SavedResponse{Status: 201}, TTL: time.Hour})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err == nil {
		t.Fatal("a transaction idle past its lease completed and committed")
	}
	tx.Rollback(ctx)
	req.Lease = time.Minute
	got, err := st.Claim(ctx, req)
	if err != nil || got.State != idemrt.Acquired || got.TakenOver {
		t.Fatalf("claim after the server ended the transaction: %+v, %v; want a fresh claim", got, err)
	}
}

// TestClaimTxDuplicateElsewhereGetsLeaseLeft: a duplicate of a one-commit
// attempt held by another process (here another store on another pool)
// cannot see the uncommitted record; it is told InProgress with the
// holder's remaining lease (from the advisory lock's holder), so that
// Retry-After reflects it (it was 0, answered Retry-After: 1, while 8 s
// were left).
func TestClaimTxDuplicateElsewhereGetsLeaseLeft(t *testing.T) {
	db := newTestDB(t)
	a, b := db.store(t), db.store(t)
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "elsewhere")}
	req := idemrt.ClaimRequest{RecordKey: k, Lease: 10 * time.Second, TTL: time.Hour}
	tx, res, err := a.BeginClaim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("BeginClaim: %+v, %v", res, err)
	}
	defer tx.Rollback(ctx)
	time.Sleep(1100 * time.Millisecond)
	_, dup, err := b.BeginClaim(ctx, req)
	if err != nil || dup.State != idemrt.InProgress {
		t.Fatalf("duplicate: %+v, %v; want InProgress", dup, err)
	}
	if dup.LeaseRemaining < 8*time.Second || dup.LeaseRemaining > 9*time.Second {
		t.Errorf("duplicate: LeaseRemaining %v while about 8.9 s are left", dup.LeaseRemaining)
	}
}

// TestBeginClaimOneRoundTripPaths: BeginClaim sends BEGIN with the claim
// in one query and reads its outcome from the server's report of
// application_name; every outcome is checked, with the prepared claim
// (pgx's default statement cache) and with the whole statement (the mode
// for pgbouncer's transaction pooling): a first claim, a replay, a reused
// key (the stored fingerprint comes back for the 422), a takeover of an
// expired committed lease (epoch + 1), a duplicate of an attempt still in
// its transaction (InProgress with its lease). No outcome costs the pool
// a connection (a connection left in a transaction would be closed on
// release), and the session's application_name is its own again after
// each transaction, whether it is short or as long as the server allows
// (63 bytes: the outcome must still fit).
func TestBeginClaimOneRoundTripPaths(t *testing.T) {
	for _, c := range []struct {
		mode    pgx.QueryExecMode
		appName string
	}{
		{pgx.QueryExecModeCacheStatement, "billing-api"},
		{pgx.QueryExecModeExec, "billing-api"},
		{pgx.QueryExecModeCacheStatement, strings.Repeat("payments-service-eu-west-1/", 3)[:63]},
	} {
		mode, appName := c.mode, c.appName
		t.Run(fmt.Sprintf("%v/%d-byte-name", mode, len(appName)), func(t *testing.T) {
			db := newTestDB(t)
			pool := db.pool(t, func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
				c.ConnConfig.RuntimeParams["application_name"] = appName
				c.MaxConns = 4
			})
			st, err := NewStore(context.Background(), pool)
			if err != nil {
				t.Fatal(err)
			}
			if st.inlineClaim != (mode != pgx.QueryExecModeCacheStatement) {
				t.Fatalf("inlineClaim %v in mode %v", st.inlineClaim, mode)
			}
			ctx := context.Background()
			k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "paths")}
			req := idemrt.ClaimRequest{RecordKey: k, Fingerprint: [32]byte{1}, FingerprintVersion: 2, Lease: 10 * time.Second, TTL: time.Hour}
			created := pool.Stat().NewConnsCount()

			tx, first, err := st.BeginClaim(ctx, req)
			if err != nil || first.State != idemrt.Acquired || first.TakenOver || first.Epoch <= 0 {
				t.Fatalf("first claim: %+v, %v", first, err)
			}
			// A duplicate while the first attempt is in its transaction.
			_, dup, err := st.BeginClaim(ctx, req)
			if err != nil || dup.State != idemrt.InProgress || dup.LeaseRemaining < 8*time.Second || dup.LeaseRemaining > 10*time.Second {
				t.Fatalf("duplicate in flight: %+v, %v; want InProgress with about 10 s left", dup, err)
			}
			resp := &idemrt.SavedResponse{Status: 201, Header: http.Header{"Location": {"/charges/1"}}, Body: []byte(`{"id":1}`)}
			if err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: first.Epoch, Response: resp, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}

			_, replay, err := st.BeginClaim(ctx, req)
			if err != nil || replay.State != idemrt.Completed || replay.Epoch != first.Epoch || replay.Response == nil ||
				string(replay.Response.Body) != `{"id":1}` || replay.Response.Header.Get("Location") != "/charges/1" {
				t.Fatalf("replay: %+v, %v", replay, err)
			}
			other := req
			other.Fingerprint = [32]byte{2}
			_, reused, err := st.BeginClaim(ctx, other)
			if err != nil || reused.State != idemrt.Completed || reused.Fingerprint != req.Fingerprint {
				t.Fatalf("reused key: %+v, %v; want Completed with the first request's fingerprint", reused, err)
			}

			// A committed claim (non-transactional) whose lease ends.
			k2 := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "paths-takeover")}
			short := idemrt.ClaimRequest{RecordKey: k2, Fingerprint: [32]byte{3}, Lease: 200 * time.Millisecond, TTL: time.Hour}
			abandoned, err := st.Claim(ctx, short)
			if err != nil || abandoned.State != idemrt.Acquired {
				t.Fatalf("claim: %+v, %v", abandoned, err)
			}
			_, held, err := st.BeginClaim(ctx, short)
			if err != nil || held.State != idemrt.InProgress || held.Epoch != abandoned.Epoch {
				t.Fatalf("claim within the lease: %+v, %v; want InProgress at epoch %d", held, err, abandoned.Epoch)
			}
			time.Sleep(400 * time.Millisecond)
			short.Lease = 10 * time.Second
			tx2, took, err := st.BeginClaim(ctx, short)
			if err != nil || took.State != idemrt.Acquired || !took.TakenOver || took.Epoch != abandoned.Epoch+1 {
				t.Fatalf("takeover: %+v, %v; want Acquired, TakenOver at epoch %d", took, err, abandoned.Epoch+1)
			}
			if err := tx2.Complete(ctx, idemrt.Completion{RecordKey: k2, Epoch: took.Epoch, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := tx2.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := st.Complete(ctx, idemrt.Completion{RecordKey: k2, Epoch: abandoned.Epoch, TTL: time.Hour}); !errors.Is(err, idemrt.ErrFenced) {
				t.Errorf("the abandoned attempt completes after the takeover committed: %v, want ErrFenced", err)
			}

			if n := pool.Stat().NewConnsCount() - created; n > 3 {
				t.Errorf("%d connections opened for 2 concurrent transactions at most: the pool closed connections left in a transaction", n)
			}
			var name string
			if err := pool.QueryRow(ctx, "SHOW application_name").Scan(&name); err != nil || name != appName {
				t.Errorf("application_name after the claims: %q, %v; want %q", name, err, appName)
			}
		})
	}
}

// TestBeginClaimKeysAsLiterals: BeginClaim writes the claim's arguments
// into its query as literals: quoted text on a session that reads quoted
// strings as written (standard_conforming_strings on), hex decoded by the
// server otherwise. A scope and keys with quotes, backslashes, SQL and
// non-ASCII text are stored byte for byte either way: the committed
// record is found and replayed by the non-transactional Claim, whose
// arguments are bound parameters, and nothing in them runs as SQL.
func TestBeginClaimKeysAsLiterals(t *testing.T) {
	for _, conforming := range []string{"on", "off"} {
		t.Run("standard_conforming_strings="+conforming, func(t *testing.T) {
			db := newTestDB(t)
			pool := db.pool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["standard_conforming_strings"] = conforming })
			st, err := NewStore(context.Background(), pool)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i, key := range []idemrt.RecordKey{
				{Scope: "create'Charge", Key: "o'brien"},
				{Scope: "createCharge", Key: `back\slash\'`},
				{Scope: "createCharge", Key: "'); DROP TABLE idempotency_keys; --"},
				{Scope: "createCharge", Key: "ключ-✓ " + conforming},
			} {
				req := idemrt.ClaimRequest{RecordKey: key, Fingerprint: [32]byte{byte(i)}, Lease: 10 * time.Second, TTL: time.Hour}
				tx, res, err := st.BeginClaim(ctx, req)
				if err != nil || res.State != idemrt.Acquired {
					t.Fatalf("%q: BeginClaim: %+v, %v", key.Key, res, err)
				}
				resp := &idemrt.SavedResponse{Status: 201, Body: []byte(key.Key)}
				if err := tx.Complete(ctx, idemrt.Completion{RecordKey: key, Epoch: res.Epoch, Response: resp, TTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				replay, err := st.Claim(ctx, req)
				if err != nil || replay.State != idemrt.Completed || replay.Response == nil || string(replay.Response.Body) != key.Key {
					t.Fatalf("%q: the committed record read with bound parameters: %+v, %v; want Completed with the key as body", key.Key, replay, err)
				}
			}
		})
	}
}

// TestBeginClaimConcurrentReplays: a transactional claim takes the key's
// advisory lock before it reads or writes, so replays of a completed key
// running at once hold it in turn; one that finds it taken reads the
// committed record and replays it too. None of 200 concurrent replays may
// answer InProgress (409) for the others.
func TestBeginClaimConcurrentReplays(t *testing.T) {
	db := newTestDB(t)
	pool := db.pool(t, func(c *pgxpool.Config) { c.MaxConns = 8 })
	st, err := NewStore(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "replays")}
	req := idemrt.ClaimRequest{RecordKey: k, Fingerprint: [32]byte{7}, Lease: 10 * time.Second, TTL: time.Hour}
	tx, first, err := st.BeginClaim(ctx, req)
	if err != nil || first.State != idemrt.Acquired {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	if err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: first.Epoch, Response: &idemrt.SavedResponse{Status: 201}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 25 {
				_, res, err := st.BeginClaim(ctx, req)
				if err != nil || res.State != idemrt.Completed {
					errs <- fmt.Errorf("a concurrent replay: %+v, %v; want Completed", res, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
