package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
)

// memoryInfo returns used_memory and maxmemory of the server at addr.
func memoryInfo(t testing.TB, srv *harness.RedisServer) (used, limit int64) {
	t.Helper()
	for _, line := range strings.Split(srv.MustCLI(t, "INFO", "memory"), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_memory":
			used, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			limit, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return used, limit
}

// bodyHandler counts its runs per key and answers 201 with a 512-byte body,
// so that each completion adds to the record.
func bodyHandler(counter *runCounter) http.Handler {
	body := `{"pad":"` + strings.Repeat("x", 500) + `"}`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := counter.m.LoadOrStore(r.Header.Get("Idempotency-Key"), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, body)
	})
}

// TestOutOfMemory floods a private Redis with maxmemory 3mb (noeviction)
// with 6000 distinct keys from 8 workers, about four times what fits. A
// claim Redis cannot keep is refused before the handler runs (503 with
// Retry-After), and no completion is refused for memory: the completion
// and release scripts run with allow-oom. Once the leases are over, every
// key is sent again while Redis is still full: completed keys replay (from
// the read-only script) and no handler runs twice; refused keys stay
// refused. With the limit lifted, the refused keys run, once each.
func TestOutOfMemory(t *testing.T) {
	srv := harness.StartRedis(t, "--maxmemory", "3mb")
	st, _ := newStore(t, "redis://"+srv.Addr(), redisstore.Options{})
	var counter runCounter
	var claimOOM, claimOther, completeErrs, releaseErrs atomic.Int64
	var firstErr sync.Once
	hooks := idemrt.Hooks{StoreError: func(_ context.Context, e idemrt.Event) {
		msg := e.Err.Error()
		switch {
		case errors.Is(e.Err, redisstore.ErrOutOfMemory):
			claimOOM.Add(1)
			firstErr.Do(func() { t.Logf("first refused claim: %v", e.Err) })
		case strings.Contains(msg, "complete:"):
			completeErrs.Add(1)
		case strings.Contains(msg, "release:"):
			releaseErrs.Add(1)
		default:
			claimOther.Add(1)
			t.Errorf("store error on %s: %v", e.Key, e.Err)
		}
	}}
	h, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: hooks}, harness.Policy(false), bodyHandler(&counter))
	if err != nil {
		t.Fatal(err)
	}
	const keys = 6000
	var mu sync.Mutex
	var accepted, refused []string
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= keys {
					return
				}
				key := fmt.Sprintf("oom-%d-%d-%d", time.Now().UnixNano(), w, i)
				res := harness.Do(h, key)
				mu.Lock()
				switch res.Code {
				case http.StatusCreated:
					accepted = append(accepted, key)
				case http.StatusServiceUnavailable:
					refused = append(refused, key)
					if res.Header().Get("Retry-After") == "" || !strings.Contains(res.Body.String(), idemrt.ProblemStoreUnavailable) {
						t.Errorf("refused claim: %d %v %s; want 503 store-unavailable with Retry-After", res.Code, res.Header(), res.Body)
					}
				default:
					t.Errorf("%s: %d %s", key, res.Code, res.Body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	used, limit := memoryInfo(t, srv)
	t.Logf("OOM flood: %d keys sent, %d claims accepted, %d refused (%d ErrOutOfMemory), %d completions refused, %d releases refused; used_memory %d of maxmemory %d",
		len(accepted)+len(refused), len(accepted), len(refused), claimOOM.Load(), completeErrs.Load(), releaseErrs.Load(), used, limit)
	if len(refused) == 0 {
		t.Errorf("no claim was refused in %d keys: Redis accepted claims it could not keep", len(accepted))
	}
	if n := completeErrs.Load(); n != 0 {
		t.Errorf("%d completions of granted claims were refused, want 0", n)
	}
	for _, k := range refused {
		if n := counter.runs(k); n != 0 {
			t.Errorf("%s: refused claim, but the handler ran %d times", k, n)
		}
	}

	// The leases end; everything is sent again while Redis is still full.
	time.Sleep(harness.Lease + 200*time.Millisecond)
	replayed, stillRefused := 0, 0
	for _, k := range accepted {
		res := harness.Do(h, k)
		if res.Code == http.StatusCreated && res.Header().Get("Idempotent-Replayed") == "true" {
			replayed++
		} else if len(accepted)-replayed < 5 {
			t.Logf("%s (completed) sent again while Redis is full: %d, replayed %q", k, res.Code, res.Header().Get("Idempotent-Replayed"))
		}
	}
	for _, k := range refused {
		if harness.Do(h, k).Code == http.StatusServiceUnavailable {
			stillRefused++
		}
	}
	twice := 0
	for _, k := range append(accepted, refused...) {
		if counter.runs(k) > 1 {
			twice++
		}
	}
	t.Logf("after the leases, Redis still full: %d of %d completed keys replayed, %d of %d refused keys refused again; %d keys ran their handler twice",
		replayed, len(accepted), stillRefused, len(refused), twice)
	if twice != 0 {
		t.Errorf("%d keys ran their handler twice, want 0", twice)
	}
	if replayed != len(accepted) {
		t.Errorf("%d of %d completed keys were not replayed while Redis is full", len(accepted)-replayed, len(accepted))
	}

	// With room again, a refused key runs (once).
	srv.MustCLI(t, "CONFIG", "SET", "maxmemory", "0")
	for _, k := range refused {
		if res := harness.Do(h, k); res.Code != http.StatusCreated || counter.runs(k) != 1 {
			t.Fatalf("%s once Redis has room: %d, %d runs; want 201 and 1 run", k, res.Code, counter.runs(k))
		}
	}
}

// TestOutOfMemoryStore: on a full server, Claim of a new key fails with
// ErrOutOfMemory before the script runs (nothing is written), Claim of a
// key in progress or completed still answers, and Complete and Release of
// granted claims succeed.
func TestOutOfMemoryStore(t *testing.T) {
	srv := harness.StartRedis(t, "--maxmemory", "2mb")
	st, client := newStore(t, "redis://"+srv.Addr(), redisstore.Options{})
	ctx := context.Background()
	claim := func(key string) (idemrt.ClaimResult, error) {
		return st.Claim(ctx, idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "oom", Key: key}, Lease: time.Minute, TTL: time.Hour})
	}
	var granted []idemrt.ClaimResult
	var names []string
	for i := range 4 {
		res, err := claim(fmt.Sprint("granted-", i))
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim before the fill: %+v %v", res, err)
		}
		granted, names = append(granted, res), append(names, fmt.Sprint("granted-", i))
	}
	done, err := claim("done")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, idemrt.Completion{RecordKey: idemrt.RecordKey{Scope: "oom", Key: "done"}, Epoch: done.Epoch, TTL: time.Hour,
		Response: &idemrt.SavedResponse{Status: 201, Body: []byte("ok")}}); err != nil {
		t.Fatal(err)
	}
	// Fill the server with plain values until it refuses a write.
	pad := strings.Repeat("p", 4096)
	for i := 0; ; i++ {
		err := client.Set(ctx, fmt.Sprint("fill-", i), pad, 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			break
		}
		if err != nil || i > 10000 {
			t.Fatalf("filling: %v after %d values", err, i)
		}
	}
	keys, _ := client.DBSize(ctx).Result()
	_, err = claim("new")
	if !errors.Is(err, redisstore.ErrOutOfMemory) || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("claim of a new key on a full server: %v, want ErrOutOfMemory with the server's OOM error", err)
	}
	if n, _ := client.DBSize(ctx).Result(); n != keys {
		t.Errorf("the refused claim changed the key count: %d -> %d", keys, n)
	}
	if res, err := claim(names[0]); err != nil || res.State != idemrt.InProgress {
		t.Errorf("claim of a key in progress on a full server: %+v %v, want in progress", res, err)
	}
	if res, err := claim("done"); err != nil || res.State != idemrt.Completed || string(res.Response.Body) != "ok" {
		t.Errorf("claim of a completed key on a full server: %+v %v, want the saved response", res, err)
	}
	big := []byte(strings.Repeat("b", 64<<10))
	for i, g := range granted[:2] {
		if err := st.Complete(ctx, idemrt.Completion{RecordKey: idemrt.RecordKey{Scope: "oom", Key: names[i]}, Epoch: g.Epoch, TTL: time.Hour,
			Response: &idemrt.SavedResponse{Status: 201, Body: big}}); err != nil {
			t.Errorf("completion of a granted claim on a full server: %v", err)
		}
	}
	if err := st.Release(ctx, idemrt.RecordKey{Scope: "oom", Key: names[2]}, granted[2].Epoch); err != nil {
		t.Errorf("release of a granted claim on a full server: %v", err)
	}
	// A released key needs a new claim: refused while full.
	if _, err := claim(names[2]); !errors.Is(err, redisstore.ErrOutOfMemory) {
		t.Errorf("claim of a released key on a full server: %v, want ErrOutOfMemory", err)
	}
	if res, err := claim(names[0]); err != nil || res.State != idemrt.Completed || len(res.Response.Body) != len(big) {
		t.Errorf("replay of a completion made while full: %v", err)
	}
}

// evictingPolicies are every maxmemory-policy but noeviction.
var evictingPolicies = []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random"}

// TestEvictingPolicyRefused: New refuses every maxmemory-policy but
// noeviction, naming the setting and the fix, also where CONFIG is
// disabled (it reads INFO memory).
func TestEvictingPolicyRefused(t *testing.T) {
	ctx := context.Background()
	srv := harness.StartRedis(t)
	c := dial(t, "redis://"+srv.Addr())
	for _, p := range evictingPolicies {
		srv.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", p)
		_, err := redisstore.New(ctx, c, redisstore.Options{Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), "maxmemory-policy "+p) || !strings.Contains(err.Error(), "set maxmemory-policy noeviction") {
			t.Errorf("New with maxmemory-policy %s: %v; want a refusal naming the policy and noeviction", p, err)
		}
	}
	srv.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	if _, err := redisstore.New(ctx, c, redisstore.Options{Logger: testLogger(t)}); err != nil {
		t.Fatalf("New with noeviction: %v", err)
	}
	noConfig := harness.StartRedis(t, "--maxmemory-policy", "volatile-lru", "--rename-command", "CONFIG", "")
	if out, _ := noConfig.CLI("CONFIG", "GET", "maxmemory-policy"); !strings.Contains(out, "unknown command") {
		t.Fatalf("CONFIG is not disabled: %s", out)
	}
	_, err := redisstore.New(ctx, dial(t, "redis://"+noConfig.Addr()), redisstore.Options{Logger: testLogger(t)})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "maxmemory-policy volatile-lru") {
		t.Fatalf("New with volatile-lru and CONFIG disabled: %v; want a refusal", err)
	}
}

// recheckedHandler is a protected handler over a store on srv that
// re-checks the server every 20 ms, logging to logs, once a first request
// was answered 201.
func recheckedHandler(t *testing.T, srv *harness.RedisServer) (st *redisstore.Store, h http.Handler, logs *logBuffer) {
	t.Helper()
	logs = &logBuffer{}
	st, _ = newStore(t, "redis://"+srv.Addr(), redisstore.Options{RecheckInterval: 20 * time.Millisecond, Logger: logs.logger()})
	h, err := idemrt.Wrap(idemrt.Options{Store: st}, harness.Policy(false), bodyHandler(&runCounter{}))
	if err != nil {
		t.Fatal(err)
	}
	if w := harness.Do(h, harness.UniqueKey(t, "before")); w.Code != http.StatusCreated {
		t.Fatalf("the first request: %d", w.Code)
	}
	return st, h, logs
}

// TestEvictingPolicyRechecked: a maxmemory-policy changed to an evicting
// one after New (CONFIG SET, a managed service's parameter) is found by
// the store's re-check: every claim is then refused (503 with Retry-After,
// ErrEvictingPolicy, logged once), nothing runs, and claims resume once
// the policy is noeviction again.
func TestEvictingPolicyRechecked(t *testing.T) {
	srv := harness.StartRedis(t)
	st, h, logs := recheckedHandler(t, srv)
	srv.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
	// until answers the first response with status code to new keys, and
	// how many requests ran their handler before it.
	until := func(code int) (ran int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			w := harness.Do(h, harness.UniqueKey(t, "k"))
			if w.Code == code {
				if code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
				return ran
			}
			ran++
		}
		t.Fatalf("no %d within 10s", code)
		return ran
	}
	ran := until(http.StatusServiceUnavailable)
	_, err := st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "s", Key: "k"}, Lease: time.Second, TTL: time.Minute})
	if !errors.Is(err, redisstore.ErrEvictingPolicy) || !strings.Contains(err.Error(), "maxmemory-policy allkeys-lru") {
		t.Errorf("Claim under allkeys-lru: %v; want ErrEvictingPolicy naming the policy", err)
	}
	for range 5 {
		if w := harness.Do(h, harness.UniqueKey(t, "refused")); w.Code != http.StatusServiceUnavailable {
			t.Errorf("a new key under allkeys-lru: %d, want 503", w.Code)
		}
	}
	if n := strings.Count(logs.String(), "refusing every claim"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once:\n%s", n, logs.String())
	}
	srv.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	until(http.StatusCreated)
	if !strings.Contains(logs.String(), "claims resume") {
		t.Errorf("the resumption was not logged:\n%s", logs.String())
	}
	t.Logf("%d claims granted between CONFIG SET and the refusal (re-check every 20ms)", ran)
}

// TestEvictionRunsTwice is the case the refusal rules out, measured: a
// server whose policy is changed to volatile-lru after New (New refuses it
// at start-up; the store's re-check is off here), merchant A's 100
// completed charges, then merchant B's traffic: 8000 new keys. Evicted
// records of A run again when A retries.
func TestEvictionRunsTwice(t *testing.T) {
	srv := harness.StartRedis(t, "--maxmemory", "3mb")
	dsn := "redis://" + srv.Addr()
	st, client := newStore(t, dsn, redisstore.Options{RecheckInterval: -1})
	srv.MustCLI(t, "CONFIG", "SET", "maxmemory-policy", "volatile-lru")
	if _, err := redisstore.New(context.Background(), dial(t, dsn), redisstore.Options{Logger: testLogger(t)}); err == nil {
		t.Fatal("New accepted maxmemory-policy volatile-lru")
	}
	var counter runCounter
	var storeErrs atomic.Int64
	h, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: idemrt.Hooks{StoreError: func(context.Context, idemrt.Event) { storeErrs.Add(1) }}},
		harness.Policy(false), bodyHandler(&counter))
	if err != nil {
		t.Fatal(err)
	}
	merchantA := make([]string, 100)
	for i := range merchantA {
		merchantA[i] = harness.UniqueKey(t, fmt.Sprint("merchant-a-", i))
		if w := harness.Do(h, merchantA[i]); w.Code != http.StatusCreated {
			t.Fatalf("merchant A: %d", w.Code)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				harness.Do(h, fmt.Sprintf("merchant-b-%d-%d-%d", time.Now().UnixNano(), w, i))
			}
		}()
	}
	wg.Wait()
	evicted, twice := 0, 0
	for _, k := range merchantA {
		if n, _ := client.Exists(context.Background(), st.Key(idemrt.RecordKey{Scope: "createCharge", Key: k})).Result(); n == 0 {
			evicted++
		}
		harness.Do(h, k)
		if counter.runs(k) > 1 {
			twice++
		}
	}
	info := srv.MustCLI(t, "INFO", "stats")
	ev := ""
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "evicted_keys:") {
			ev = strings.TrimSpace(line)
		}
	}
	t.Logf("EVICTION volatile-lru (refused by New): %d of %d completed records of merchant A evicted by merchant B's 8000 keys, %d of A's retries charged again; %s, %d store errors",
		evicted, len(merchantA), twice, ev, storeErrs.Load())
}

// TestAppendOnlyChecked: in WAIT mode New refuses a primary without an
// append-only file unless AllowNoAppendOnly accepts it; in plain mode it
// warns (Options.Logger). A primary with appendonly yes passes both.
func TestAppendOnlyChecked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args []string
		aof  bool
	}{
		{"NoPersistence", nil, false},
		{"RDBOnly", []string{"--save", "3600 1"}, false},
		{"AppendOnly", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := harness.StartRedis(t, tc.args...)
			harness.StartRedis(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}, tc.args...)...)
			waitReplicas(t, primary, 1)
			c := dial(t, "redis://"+primary.Addr())
			var logs logBuffer
			_, err := redisstore.New(ctx, c, redisstore.Options{WaitReplicas: 1, Logger: logs.logger()})
			if tc.aof && err != nil {
				t.Fatalf("WAIT mode with appendonly yes: %v", err)
			}
			if !tc.aof && (err == nil || !strings.Contains(err.Error(), "appendonly") || !strings.Contains(err.Error(), "AllowNoAppendOnly")) {
				t.Fatalf("WAIT mode without an append-only file: %v; want a refusal naming appendonly and AllowNoAppendOnly", err)
			}
			t.Log(err)
			if _, err := redisstore.New(ctx, c, redisstore.Options{WaitReplicas: 1, AllowNoAppendOnly: true, Logger: logs.logger()}); err != nil {
				t.Fatalf("WAIT mode with AllowNoAppendOnly: %v", err)
			}
			if _, err := redisstore.New(ctx, c, redisstore.Options{Logger: logs.logger()}); err != nil {
				t.Fatalf("plain mode: %v", err)
			}
			warned := strings.Contains(logs.String(), "no append-only file") && strings.Contains(logs.String(), primary.Addr())
			if warned == tc.aof {
				t.Fatalf("plain mode: warned %v, want %v; log:\n%s", warned, !tc.aof, logs.String())
			}
			logs.reset()
			if _, err := redisstore.New(ctx, c, redisstore.Options{AllowNoAppendOnly: true, Logger: logs.logger()}); err != nil || logs.String() != "" {
				t.Fatalf("plain mode with AllowNoAppendOnly: %v, log %q; want no warning", err, logs.String())
			}
		})
	}
}

// logBuffer collects a logger's output.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logBuffer) reset()         { l.mu.Lock(); defer l.mu.Unlock(); l.b.Reset() }
func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, nil))
}

// TestPrimaryRestart kills -9 a standalone primary (with one replica)
// after 300 of 1200 keys and starts it again at once, as a supervisor
// would, in plain and WAIT mode, with no persistence and with appendonly
// yes + appendfsync always, and counts the keys that ran again although
// their completion had been acknowledged. Without persistence the primary
// comes back empty, its replica resynchronises to that, and acknowledged
// keys run again in both modes: why WAIT mode needs persistence (New
// refuses it without AllowNoAppendOnly). With the append-only file none do.
func TestPrimaryRestart(t *testing.T) {
	aof := []string{"--appendonly", "yes", "--appendfsync", "always"}
	for _, tc := range []struct {
		name    string
		args    []string
		waitN   int
		persist bool
	}{
		{"PlainNoPersistence", nil, 0, false},
		{"WaitNoPersistence", nil, 1, false},
		{"PlainAppendOnly", aof, 0, true},
		{"WaitAppendOnly", aof, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := harness.StartRedis(t, tc.args...)
			harness.StartRedis(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}, tc.args...)...)
			waitReplicas(t, primary, 1)
			st, _ := newStore(t, "redis://"+primary.Addr(), redisstore.Options{WaitReplicas: tc.waitN, WaitTimeout: 300 * time.Millisecond, AllowNoAppendOnly: !tc.persist})
			crash := func() error {
				primary.Kill()
				return primary.Restart()
			}
			acked, unacked := killStorm(t, st, crash, func(t testing.TB) { waitReplicas(t, primary, 1) })
			t.Logf("RESTART %s: %d keys ran twice after an acknowledged completion, %d after a failed one", tc.name, acked, unacked)
			if tc.persist && acked != 0 {
				t.Errorf("with appendonly yes: %d acknowledged keys ran again after the restart, want 0", acked)
			}
			if !tc.persist && acked == 0 {
				t.Errorf("without persistence no acknowledged key ran again: the restart lost nothing, so the test shows nothing")
			}
		})
	}
}

// TestRestartWithoutPersistenceRefuses: a primary killed and restarted
// after New without an append-only file comes back empty. The store's
// re-check sees its run_id change, logs it, and refuses every claim (503
// with Retry-After, ErrRestartedEmpty) until the node has been up for the
// longest lease granted, so that a retry of a claim in progress that the
// restart lost cannot run beside the first attempt; then claims resume.
// With appendonly yes a restart loses nothing and nothing is refused. A
// restart from an RDB snapshot, which holds the claim script's marker
// (marker.go), is refused by the re-check: its new run_id is not taken for
// a failover.
func TestRestartWithoutPersistenceRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		aof      bool
		snapshot bool
	}{{"appendonly false", false, false}, {"appendonly true", true, false}, {"snapshot", false, true}} {
		aof := tc.aof
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if aof {
				args = []string{"--appendonly", "yes", "--appendfsync", "always"}
			}
			srv := harness.StartRedis(t, args...)
			_, h, logs := recheckedHandler(t, srv)
			if tc.snapshot {
				srv.MustCLI(t, "SAVE")
				for range 3 {
					harness.Do(h, harness.UniqueKey(t, "after-save"))
				}
			}
			srv.Kill()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			restarted := time.Now()
			refused, first201 := 0, time.Duration(0)
			for time.Since(restarted) < harness.Lease+3*time.Second {
				w := harness.Do(h, harness.UniqueKey(t, "after"))
				switch {
				case w.Code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") != "":
					refused++
				case w.Code == http.StatusCreated && refused > 0 || w.Code == http.StatusCreated && aof && time.Since(restarted) > 200*time.Millisecond:
					first201 = time.Since(restarted)
				}
				if first201 > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if aof {
				if refused > 0 || strings.Contains(logs.String(), "restarted without persistence") {
					t.Errorf("with appendonly yes: %d claims refused after the restart; log:\n%s", refused, logs.String())
				}
				return
			}
			if refused == 0 || first201 == 0 {
				t.Fatalf("without persistence: %d claims refused, claims resumed after %v; want refusals, then 201s", refused, first201)
			}
			if first201 < harness.Lease-500*time.Millisecond {
				t.Errorf("claims resumed %v after the restart, before the lease (%v) of the claims it lost could end", first201, harness.Lease)
			}
			if n := strings.Count(logs.String(), "restarted without persistence"); n != 1 {
				t.Errorf("the restart was logged %d times, want once:\n%s", n, logs.String())
			}
			t.Logf("without persistence: %d claims refused after the restart; claims resumed after %v (lease %v)", refused, first201.Round(time.Millisecond), harness.Lease)
		})
	}
}
