package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

func TestConformanceStandalone(t *testing.T) {
	srv := harness.StartRedis(t)
	storetest.RunWith(t, storetest.Config{SelfExpiring: true}, func(t *testing.T) idemrt.Store {
		st, _ := newStore(t, "redis://"+srv.Addr(), redisstore.Options{})
		return st
	})
}

func TestStandalone(t *testing.T) {
	srv := harness.StartRedis(t)
	dsn := "redis://" + srv.Addr()
	st, client := newStore(t, dsn, redisstore.Options{})
	b := backend(st, client)
	t.Run("Storm", func(t *testing.T) {
		var stores []idemrt.Store
		for range 4 {
			s, _ := newStore(t, dsn, redisstore.Options{})
			stores = append(stores, s)
		}
		harness.Storm(t, b, stores, 200)
	})
	t.Run("StormProcesses", func(t *testing.T) {
		harness.StormProcesses(t, b, starter(dsn), 8)
	})
	t.Run("LargeResponse", func(t *testing.T) { harness.LargeResponse(t, st) })
	t.Run("MountedTwice", func(t *testing.T) {
		// Two stores (clients) of one server and prefix are one store to
		// the runtime; another prefix is another.
		other, _ := newStore(t, dsn, redisstore.Options{})
		elsewhere, _ := newStore(t, dsn, redisstore.Options{Prefix: "idem-other:"})
		harness.MountedTwice(t, st, other, elsewhere, false)
	})
	t.Run("ServerClock", func(t *testing.T) {
		other, _ := newStore(t, dsn, redisstore.Options{})
		harness.DatabaseClock(t, st, other, func(ctx context.Context, key string) (time.Duration, error) {
			k := st.Key(idemrt.RecordKey{Scope: "clock", Key: key})
			l, err := client.HGet(ctx, k, "l").Int64()
			if err != nil {
				return 0, err
			}
			now, err := client.Time(ctx).Result()
			return time.Duration(l-now.UnixMilli()) * time.Millisecond, err
		})
	})
	t.Run("ExpiresByPEXPIRE", func(t *testing.T) {
		// The record carries the TTL as a Redis expiry: Redis deletes it.
		ctx := context.Background()
		k := idemrt.RecordKey{Scope: "ttl", Key: harness.UniqueKey(t, "ttl")}
		res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		ttl, err := client.PTTL(ctx, st.Key(k)).Result()
		if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("PTTL after the claim = %v, %v; want about 1h", ttl, err)
		}
		if err := st.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: 2 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		ttl, err = client.PTTL(ctx, st.Key(k)).Result()
		if err != nil || ttl <= 119*time.Minute || ttl > 2*time.Hour {
			t.Fatalf("PTTL after the completion = %v, %v; want about 2h", ttl, err)
		}
	})
	t.Run("HashTag", func(t *testing.T) {
		k := st.Key(idemrt.RecordKey{Scope: "s", PrincipalHash: idemrt.HashPrincipal("p"), Key: "k{x}"})
		if !strings.HasPrefix(k, redisstore.DefaultPrefix+"{") || !strings.HasSuffix(k, "}") || strings.Count(k, "{") != 1 {
			t.Errorf("key %q: want prefix{hash}", k)
		}
		// Scope and key are length-prefixed: moving a byte between them
		// changes the record.
		a := st.Key(idemrt.RecordKey{Scope: "ab", Key: "c"})
		if a == st.Key(idemrt.RecordKey{Scope: "a", Key: "bc"}) {
			t.Error("(ab, c) and (a, bc) share a record")
		}
	})
}

// TestTransactionalRefused: the Redis store is not a TxStore, so a
// transactional operation is refused when the wrapper is built, with the
// operation's name.
func TestTransactionalRefused(t *testing.T) {
	srv := harness.StartRedis(t)
	st, _ := newStore(t, "redis://"+srv.Addr(), redisstore.Options{})
	_, err := idemrt.Wrap(idemrt.Options{Store: st}, harness.Policy(true), http.NotFoundHandler())
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "createCharge") || !strings.Contains(err.Error(), "TxStore") {
		t.Fatalf("Wrap of a transactional operation over the Redis store: %v; want an error naming createCharge and TxStore", err)
	}
	if _, err := idemrt.Wrap(idemrt.Options{Store: st}, harness.Policy(false), http.NotFoundHandler()); err != nil {
		t.Fatalf("Wrap of a plain operation: %v", err)
	}
}

// TestReplicaRefused: New refuses a replica, and in WAIT mode a primary
// with fewer replicas than asked.
func TestReplicaRefused(t *testing.T) {
	primary := harness.StartRedis(t)
	replica := harness.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	ctx := context.Background()
	c := dial(t, "redis://"+replica.Addr())
	_, err := redisstore.New(ctx, c, redisstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "is a replica") {
		t.Fatalf("New on a replica: %v, want a refusal", err)
	}
	waitReplicas(t, primary, 1)
	p := dial(t, "redis://"+primary.Addr())
	if _, err := redisstore.New(ctx, p, redisstore.Options{WaitReplicas: 1, AllowNoAppendOnly: true}); err != nil {
		t.Fatalf("New on the primary with WaitReplicas 1: %v", err)
	}
	_, err = redisstore.New(ctx, p, redisstore.Options{WaitReplicas: 2, AllowNoAppendOnly: true})
	if err == nil || !strings.Contains(err.Error(), "has 1 connected replicas, WaitReplicas asks for 2") {
		t.Fatalf("New with WaitReplicas 2 and one replica: %v, want a refusal", err)
	}
}

// waitReplicas waits until primary has n replicas online that acknowledge
// a write (WAIT), so that the replication stream is flowing.
func waitReplicas(t testing.TB, primary *harness.RedisServer, n int) {
	t.Helper()
	c := dial(t, "redis://"+primary.Addr()).(*redis.Client)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := primary.MustCLI(t, "INFO", "replication")
		if strings.Contains(out, "connected_slaves:"+strconv.Itoa(n)) && strings.Contains(out, "state=online") {
			conn := c.Conn()
			conn.Set(ctx, "probe", "1", 0)
			acked, err := conn.Wait(ctx, n, 200*time.Millisecond).Result()
			conn.Close()
			if err == nil && int(acked) >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not connect: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWaitFailsClosed: in WAIT mode a claim is acknowledged once the
// replica has it; with the replica gone the claim fails with
// ErrNotReplicated and the wrapper answers 503 without running the handler.
func TestWaitFailsClosed(t *testing.T) {
	primary := harness.StartRedis(t)
	replica := harness.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	waitReplicas(t, primary, 1)
	st, client := newStore(t, "redis://"+primary.Addr(), redisstore.Options{WaitReplicas: 1, WaitTimeout: time.Second, AllowNoAppendOnly: true})
	b := backend(st, client)
	var runs atomic.Int64
	h, err := idemrt.Wrap(idemrt.Options{Store: st, StoreTimeout: 1400 * time.Millisecond}, harness.Policy(false), harness.Handler(b, "w", &runs, nil))
	if err != nil {
		t.Fatal(err)
	}
	key := harness.UniqueKey(t, "wait")
	if w := harness.Do(h, key); w.Code != http.StatusCreated {
		t.Fatalf("with the replica up: %d %s", w.Code, w.Body)
	}
	rc := dial(t, "redis://"+replica.Addr())
	if n, err := rc.Exists(context.Background(), st.Key(idemrt.RecordKey{Scope: "createCharge", Key: key})).Result(); err != nil || n != 1 {
		t.Fatalf("the replica does not have the completed record: %d, %v", n, err)
	}
	replica.Kill()
	ctx := context.Background()
	_, err = st.Claim(ctx, idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "s", Key: harness.UniqueKey(t, "lost")}, Lease: time.Minute, TTL: time.Hour})
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("claim without the replica: %v, want ErrNotReplicated", err)
	}
	w := harness.Do(h, harness.UniqueKey(t, "wait-down"))
	if w.Code != http.StatusServiceUnavailable || runs.Load() != 1 {
		t.Fatalf("request without the replica: %d with %d runs, want 503 and 1 (the first request's)", w.Code, runs.Load())
	}
	// A replay reads and writes nothing, so it needs no replica.
	if w := harness.Do(h, key); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay without the replica: %d %v", w.Code, w.Header())
	}
}

// TestCutConnection: with the connection to Redis cut, requests get 503
// and the handler does not run; once it is back, each key runs once.
func TestCutConnection(t *testing.T) {
	srv := harness.StartRedis(t)
	proxy := harness.NewProxy(t, srv.Addr())
	st, client := newStore(t, "redis://"+proxy.Addr(), redisstore.Options{})
	direct := dial(t, "redis://"+srv.Addr())
	b := backend(st, direct)
	_ = client
	var runs atomic.Int64
	h, err := idemrt.Wrap(idemrt.Options{Store: st, StoreTimeout: 500 * time.Millisecond}, harness.Policy(false), harness.Handler(b, "w", &runs, nil))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{harness.UniqueKey(t, "cut-a"), harness.UniqueKey(t, "cut-b")}
	proxy.Cut()
	for _, k := range keys {
		w := harness.Do(h, k)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), idemrt.ProblemStoreUnavailable) {
			t.Fatalf("request while cut: %d %v %s; want 503 store-unavailable with Retry-After", w.Code, w.Header(), w.Body)
		}
	}
	proxy.Stall()
	w := harness.Do(h, harness.UniqueKey(t, "stall"))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("request while stalled: %d, want 503 within the StoreTimeout", w.Code)
	}
	proxy.Resume()
	if runs.Load() != 0 {
		t.Fatalf("handler ran %d times without a claim", runs.Load())
	}
	proxy.Restore()
	for _, k := range keys {
		deadline := time.Now().Add(10 * time.Second)
		for {
			w := harness.Do(h, k)
			if w.Code == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("retry after the cut: %d %s", w.Code, w.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if w := harness.Do(h, k); w.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("second retry of %s not replayed", k)
		}
	}
	if runs.Load() != int64(len(keys)) {
		t.Errorf("handler ran %d times for %d keys", runs.Load(), len(keys))
	}
}
