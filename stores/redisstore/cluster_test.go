package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestCluster runs on a 6-node Redis Cluster (3 primaries, 3 replicas).
func TestCluster(t *testing.T) {
	c := harness.StartRedisCluster(t, 3, 1)
	dsn := clusterDSN(c)
	t.Run("Conformance", func(t *testing.T) {
		storetest.RunWith(t, storetest.Config{SelfExpiring: true}, func(t *testing.T) idemrt.Store {
			st, _ := newStore(t, dsn, redisstore.Options{})
			return st
		})
	})
	st, client := newStore(t, dsn, redisstore.Options{})
	b := backend(st, client)
	t.Run("PlainClientRefused", func(t *testing.T) {
		_, err := redisstore.New(context.Background(), dial(t, "redis://"+c.Nodes[0].Addr()), redisstore.Options{})
		if err == nil || !strings.Contains(err.Error(), "is a Redis Cluster node") {
			t.Fatalf("New with a plain client on a cluster node: %v, want a refusal", err)
		}
	})
	t.Run("EvictingPolicyRefused", func(t *testing.T) {
		// Every primary is checked: one with an evicting policy is refused.
		var node *harness.RedisServer
		for _, n := range c.Primaries(t) {
			node = n
			break
		}
		node.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
		defer node.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		_, err := redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), node.Addr()+" has maxmemory-policy allkeys-lru") {
			t.Fatalf("New on a cluster with one primary on allkeys-lru: %v; want a refusal naming %s", err, node.Addr())
		}
	})
	t.Run("ReplicaSettingsRefused", func(t *testing.T) {
		// A failover makes a replica the primary of its shard: New checks
		// the replicas' settings too, not only today's primaries.
		primaries := c.Primaries(t)
		var replica *harness.RedisServer
		for _, n := range c.Nodes {
			isPrimary := false
			for _, p := range primaries {
				isPrimary = isPrimary || p == n
			}
			if !isPrimary {
				replica = n
				break
			}
		}
		if replica == nil {
			t.Fatal("no replica in the cluster")
		}
		replica.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "volatile-lru")
		_, err := redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{Logger: testLogger(t)})
		replica.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "replica "+replica.Addr()) || !strings.Contains(err.Error(), "maxmemory-policy volatile-lru") {
			t.Fatalf("New on a cluster with a replica on volatile-lru: %v; want a refusal naming the replica %s", err, replica.Addr())
		}

		// WAIT mode: every primary has an append-only file, the replicas
		// none: refused, naming a replica.
		for _, p := range primaries {
			p.MustCLI(t, "CONFIG", "SET", "appendonly", "yes")
		}
		_, err = redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{WaitReplicas: 1, Logger: testLogger(t)})
		for _, p := range primaries {
			p.MustCLI(t, "CONFIG", "SET", "appendonly", "no")
		}
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "the Redis replica ") || !strings.Contains(err.Error(), "appendonly") {
			t.Fatalf("New in WAIT mode, primaries with an append-only file, replicas without: %v; want a refusal naming a replica", err)
		}
		if _, err := redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{Logger: testLogger(t)}); err != nil {
			t.Fatalf("New once the settings are restored: %v", err)
		}
	})
	t.Run("AppendOnlyRefused", func(t *testing.T) {
		// The cluster's nodes have no append-only file: WAIT mode needs
		// AllowNoAppendOnly.
		_, err := redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{WaitReplicas: 1, Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), "appendonly") {
			t.Fatalf("New in WAIT mode on primaries without an append-only file: %v; want a refusal", err)
		}
	})
	t.Run("Storm", func(t *testing.T) {
		var stores []idemrt.Store
		for range 4 {
			s, _ := newStore(t, dsn, redisstore.Options{})
			stores = append(stores, s)
		}
		harness.Storm(t, b, stores, 200)
	})
	t.Run("StormWait", func(t *testing.T) {
		s, _ := newStore(t, dsn, redisstore.Options{WaitReplicas: 1, AllowNoAppendOnly: true})
		harness.Storm(t, b, []idemrt.Store{s}, 200)
	})
	t.Run("StormProcesses", func(t *testing.T) {
		harness.StormProcesses(t, b, starter(dsn), 8)
	})
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range c.Primaries(t) {
			if !yield(id) {
				return
			}
		}
	})
	t.Run("Reshard", func(t *testing.T) {
		reshardStorm(t, c, dsn, redisstore.Options{}, ids[0], ids[1])
	})
	t.Run("ReshardWait", func(t *testing.T) {
		reshardStorm(t, c, dsn, redisstore.Options{WaitReplicas: 1, AllowNoAppendOnly: true}, ids[1], ids[0])
	})
}

// runCounter counts the handler's runs per key.
type runCounter struct{ m sync.Map }

func (r *runCounter) handler(worker string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := r.m.LoadOrStore(req.Header.Get("Idempotency-Key"), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(2 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"worker":%q}`, worker)
	})
}

func (r *runCounter) runs(key string) int64 {
	n, ok := r.m.Load(key)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// reshardStorm moves 300 slots from one primary to another with redis-cli
// --cluster reshard while 16 workers send each of 400 keys from 4
// goroutines at once, over and over: the first round claims, the later ones
// replay, so claims, completions and replays all meet MOVED and ASK.
// Every key's handler must run exactly once, and no request may fail.
func reshardStorm(t *testing.T, c *harness.RedisCluster, dsn string, opts redisstore.Options, from, to string) {
	st, client := newStore(t, dsn, opts)
	cc := client.(*redis.ClusterClient)
	var counter runCounter
	var storeErrs atomic.Int64
	hooks := idemrt.Hooks{StoreError: func(_ context.Context, e idemrt.Event) {
		if storeErrs.Add(1) <= 5 {
			t.Logf("store error on %s: %v", e.Key, e.Err)
		}
	}}
	h, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: hooks}, harness.Policy(false), counter.handler("r"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := make([]string, 400)
	owner := map[string]string{}
	for i := range keys {
		keys[i] = harness.UniqueKey(t, fmt.Sprintf("reshard-%d", i))
		node, err := cc.MasterForKey(ctx, st.Key(idemrt.RecordKey{Scope: "createCharge", Key: keys[i]}))
		if err != nil {
			t.Fatal(err)
		}
		owner[keys[i]] = node.Options().Addr
	}
	done := make(chan struct{})
	var statuses sync.Map
	var requests atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) {
					select {
					case <-done:
						return
					default:
					}
				}
				key := keys[i%int64(len(keys))]
				var inner sync.WaitGroup
				for range 4 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						code := harness.Do(h, key).Code
						n, _ := statuses.LoadOrStore(code, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
						requests.Add(1)
					}()
				}
				inner.Wait()
			}
		}()
	}
	c.Reshard(t, from, to, 300)
	close(done)
	wg.Wait()
	c.WaitOK(t)
	moved := 0
	for _, k := range keys {
		node, err := cc.MasterForKey(ctx, st.Key(idemrt.RecordKey{Scope: "createCharge", Key: k}))
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr != owner[k] {
			moved++
		}
		if w := harness.Do(h, k); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s after the reshard: %d, replayed %q", k, w.Code, w.Header().Get("Idempotent-Replayed"))
		}
		if n := counter.runs(k); n != 1 {
			t.Errorf("%s: handler ran %d times, want 1", k, n)
		}
	}
	got := map[int]int64{}
	statuses.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("%d requests during the reshard, statuses %v; %d of %d keys moved to another primary", requests.Load(), got, moved, len(keys))
	if moved == 0 {
		t.Error("the reshard moved none of the keys: the test exercised no MOVED/ASK")
	}
	if n := storeErrs.Load(); n != 0 {
		t.Errorf("%d store errors during the reshard, want 0", n)
	}
}

// TestClusterFailover kills -9 a primary of a 3+3 cluster while 16 workers
// claim and complete 1200 keys, then sends every key again once the
// replica has taken over, and counts keys whose handler ran twice. Without
// WAIT, Redis acknowledged writes that the replica may not have had when the
// primary died, so duplicates are counted and reported, not ruled out. With
// WAIT (WaitReplicas 1, each primary has one replica), a completion that
// was acknowledged is on the promoted replica: no such key runs twice. A
// key whose completion failed (the primary died under it) stays in
// progress and runs again after its lease in both modes (CONTRACT §4).
func TestClusterFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redisstore.Options
	}{
		{"Plain", redisstore.Options{}},
		{"Wait", redisstore.Options{WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond, AllowNoAppendOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acked, unacked := failover(t, tc.opts)
			t.Logf("FAILOVER %s: %d keys ran twice after an acknowledged completion, %d after a failed one", tc.name, acked, unacked)
			if tc.opts.WaitReplicas > 0 && acked != 0 {
				t.Errorf("WAIT mode: %d keys whose completion was acknowledged ran again after the failover, want 0", acked)
			}
		})
	}
}

// failover runs the kill -9 storm on a new 3+3 cluster: the victim, a
// primary, is killed, and started again once its replica took over: it
// rejoins as the new primary's replica (in WAIT mode that shard refuses
// claims until then).
func failover(t *testing.T, opts redisstore.Options) (dupAcked, dupUnacked int) {
	c := harness.StartRedisCluster(t, 3, 1)
	st, _ := newStore(t, clusterDSN(c), opts)
	var victim *harness.RedisServer
	for _, n := range c.Primaries(t) {
		victim = n
		break
	}
	crash := func() error {
		victim.Kill()
		if err := c.Settled(); err != nil {
			return err
		}
		return victim.Restart()
	}
	return killStorm(t, st, crash, c.WaitOK)
}

// killStorm has 16 workers claim and complete 1200 new keys through st,
// each retried until it gets 201, and runs crash after 300 keys (while
// the workers go on); then, after settle, it sends every key again (until
// 201) and returns how many keys ran more than once: with their first
// completion acknowledged (a write the crash forgot), and without.
func killStorm(t *testing.T, st idemrt.Store, crash func() error, settle func(testing.TB)) (dupAcked, dupUnacked int) {
	var counter runCounter
	var completed sync.Map
	var storeErrs atomic.Int64
	hooks := idemrt.Hooks{
		Completed:  func(_ context.Context, e idemrt.Event) { completed.Store(e.Key, true) },
		StoreError: func(context.Context, idemrt.Event) { storeErrs.Add(1) },
	}
	h, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: hooks, StoreTimeout: time.Second}, harness.Policy(false), counter.handler("f"))
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 1200)
	for i := range keys {
		keys[i] = harness.UniqueKey(t, fmt.Sprintf("failover-%d", i))
	}
	var done atomic.Int64
	killed := make(chan struct{})
	var crashErr error
	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		<-killed
		crashErr = crash()
	}()
	var killOnce sync.Once
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) {
					return
				}
				deadline := time.Now().Add(15 * time.Second)
				for {
					code := harness.Do(h, keys[i]).Code
					if code == http.StatusCreated || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if done.Add(1) == 300 {
					killOnce.Do(func() { close(killed) })
				}
			}
		}()
	}
	wg.Wait()
	<-crashed
	if crashErr != nil {
		t.Fatal(crashErr)
	}
	settle(t)
	ackedKeys := 0
	for _, k := range keys {
		_, ok := completed.Load(k)
		if ok {
			ackedKeys++
		}
		before := counter.runs(k)
		deadline := time.Now().Add(20 * time.Second)
		for {
			w := harness.Do(h, k)
			if w.Code == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the crash: %d %s", k, w.Code, w.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if counter.runs(k) > 1 {
			if ok && before == 1 {
				dupAcked++
			} else {
				dupUnacked++
			}
		}
	}
	var twice []string
	for _, k := range keys {
		if counter.runs(k) > 2 {
			twice = append(twice, k)
		}
	}
	sort.Strings(twice)
	t.Logf("%d keys, %d completions acknowledged in the first pass, %d store errors", len(keys), ackedKeys, storeErrs.Load())
	if len(twice) > 0 {
		t.Errorf("keys that ran three times or more: %v", twice)
	}
	return dupAcked, dupUnacked
}
