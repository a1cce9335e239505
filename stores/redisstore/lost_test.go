package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

// lostFixture is a protected handler over a store whose re-check is at
// its default (5 s), so that the claims of a test that takes less are
// decided by the claim script alone.
type lostFixture struct {
	st   *redisstore.Store
	h    http.Handler
	runs *runCounter
	logs *logBuffer
}

// newLostFixture returns a fixture on dsn whose handler counts its runs
// in runs (a new counter when nil).
func newLostFixture(t *testing.T, dsn string, runs *runCounter) *lostFixture {
	t.Helper()
	if runs == nil {
		runs = &runCounter{}
	}
	f := &lostFixture{runs: runs, logs: &logBuffer{}}
	f.st, _ = newStore(t, dsn, redisstore.Options{Logger: f.logs.logger(), AllowNoAppendOnly: true})
	h, err := idemrt.Wrap(idemrt.Options{Store: f.st}, harness.Policy(false), f.runs.handler("w"))
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

// charge sends key and wants want, with the handler run runs times.
func (f *lostFixture) charge(t *testing.T, key string, want int, runs int64) {
	t.Helper()
	w := harness.Do(f.h, key)
	if w.Code != want || f.runs.runs(key) != runs {
		t.Fatalf("request %s: %d with %d runs of its handler; want %d and %d runs\n%s", key, w.Code, f.runs.runs(key), want, runs, w.Body)
	}
	if want == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After")
	}
}

// TestLostRecordsRefused: a node that loses its records (restarted
// without persistence, flushed) loses a completed charge. A retry sent at
// once, before any re-check (every 5 s) could notice, must not run the
// handler again: the claim script finds its node's marker gone and
// refuses (503, ErrRestartedEmpty) for the longest lease, for every store
// on the node, one started meanwhile too; the loss is logged once; then
// claims resume.
func TestLostRecordsRefused(t *testing.T) {
	for _, how := range []string{"FLUSHALL", "restart"} {
		t.Run(how, func(t *testing.T) {
			srv := harness.StartRedis(t)
			dsn := "redis://" + srv.Addr()
			f := newLostFixture(t, dsn, nil)
			other := newLostFixture(t, dsn, f.runs)
			key := harness.UniqueKey(t, "charge")
			f.charge(t, key, http.StatusCreated, 1)
			f.charge(t, key, http.StatusCreated, 1) // the replay
			if how == "FLUSHALL" {
				srv.MustCLI(t, "FLUSHALL")
			} else {
				srv.Kill()
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			lost := time.Now()
			f.charge(t, key, http.StatusServiceUnavailable, 1)
			other.charge(t, key, http.StatusServiceUnavailable, 1)
			// A store started during the refusal does not end it.
			late := newLostFixture(t, dsn, f.runs)
			late.charge(t, harness.UniqueKey(t, "late"), http.StatusServiceUnavailable, 0)
			_, err := f.st.Claim(context.Background(), idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "s", Key: "k"}, Lease: time.Second, TTL: time.Minute})
			if !errors.Is(err, redisstore.ErrRestartedEmpty) || !strings.Contains(err.Error(), "marker") {
				t.Fatalf("Claim after the loss: %v; want ErrRestartedEmpty naming the marker", err)
			}
			t.Log(err)
			var resumed time.Duration
			for deadline := lost.Add(harness.Lease + 5*time.Second); resumed == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("claims did not resume")
				}
				if w := harness.Do(f.h, harness.UniqueKey(t, "after")); w.Code == http.StatusCreated {
					resumed = time.Since(lost)
				}
			}
			if resumed < harness.Lease {
				t.Errorf("claims resumed %v after the loss, before the lease (%v) of the claims it lost could end", resumed, harness.Lease)
			}
			if n := strings.Count(f.logs.String(), "restarted without persistence"); n != 1 || !strings.Contains(f.logs.String(), "claims resume") {
				t.Errorf("the loss was logged %d times (want once), and its end must be logged:\n%s", n, f.logs.String())
			}
			t.Logf("claims resumed %v after the loss (lease %v)", resumed.Round(time.Millisecond), harness.Lease)
		})
	}
}

// TestLostRecordsRefusedCluster: on a cluster, the primary that holds a
// completed charge is flushed; its retry, at once, is refused (the marker
// of its hash slot is gone) and does not run again, while a key on
// another primary is still claimed.
func TestLostRecordsRefusedCluster(t *testing.T) {
	c := harness.StartRedisCluster(t, 3, 0)
	dsn := clusterDSN(c)
	f := newLostFixture(t, dsn, nil)
	client := dial(t, dsn).(*redis.ClusterClient)
	ctx := context.Background()
	key := harness.UniqueKey(t, "charge")
	f.charge(t, key, http.StatusCreated, 1)
	node, err := client.MasterForKey(ctx, f.st.Key(idemrt.RecordKey{Scope: "createCharge", Key: key}))
	if err != nil {
		t.Fatal(err)
	}
	// A key held by another primary.
	var elsewhere string
	for i := 0; elsewhere == ""; i++ {
		k := fmt.Sprintf("%s-%d", key, i)
		n, err := client.MasterForKey(ctx, f.st.Key(idemrt.RecordKey{Scope: "createCharge", Key: k}))
		if err != nil {
			t.Fatal(err)
		}
		if n.Options().Addr != node.Options().Addr {
			elsewhere = k
		}
	}
	if err := node.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.charge(t, key, http.StatusServiceUnavailable, 1)
	f.charge(t, elsewhere, http.StatusCreated, 1)
	if !strings.Contains(f.logs.String(), "hash slot") {
		t.Errorf("the loss was not logged with its slot:\n%s", f.logs.String())
	}
}

// TestLostRecordsStoreStartedCluster: a store started after a cluster
// primary was flushed, before any claim found its slots' markers gone,
// must not take those slots for new (the other primaries' markers show
// that the cluster is not): a charge completed there before the flush,
// retried through the new store or the old one, is refused and does not
// run again.
func TestLostRecordsStoreStartedCluster(t *testing.T) {
	c := harness.StartRedisCluster(t, 3, 0)
	dsn := clusterDSN(c)
	f := newLostFixture(t, dsn, nil)
	client := dial(t, dsn).(*redis.ClusterClient)
	ctx := context.Background()
	key := harness.UniqueKey(t, "charge")
	f.charge(t, key, http.StatusCreated, 1)
	node, err := client.MasterForKey(ctx, f.st.Key(idemrt.RecordKey{Scope: "createCharge", Key: key}))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	late := newLostFixture(t, dsn, f.runs)
	late.charge(t, key, http.StatusServiceUnavailable, 1)
	f.charge(t, key, http.StatusServiceUnavailable, 1)
}

// TestSentinelFailover: a Sentinel failover promotes the replica, which
// has another run_id. The re-check must tell it from a restart without
// persistence: no alarm, no refusal; claims go on on the new primary, and
// the charges completed before the failover replay there.
func TestSentinelFailover(t *testing.T) {
	primary := harness.StartRedis(t)
	replica := harness.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	waitReplicas(t, primary, 1)
	sentinel := startSentinel(t, primary)
	logs := &logBuffer{}
	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{sentinel}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	st, err := redisstore.New(ctx, client, redisstore.Options{RecheckInterval: 20 * time.Millisecond, Logger: logs.logger(), AllowNoAppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs := &runCounter{}
	h, err := idemrt.Wrap(idemrt.Options{Store: st}, harness.Policy(false), runs.handler("w"))
	if err != nil {
		t.Fatal(err)
	}
	var before []string
	for i := range 20 {
		k := harness.UniqueKey(t, fmt.Sprint("before-", i))
		if w := harness.Do(h, k); w.Code != http.StatusCreated {
			t.Fatalf("before the failover: %d %s", w.Code, w.Body)
		}
		before = append(before, k)
		time.Sleep(10 * time.Millisecond) // re-checks see the primary
	}
	waitReplicas(t, primary, 1)
	sentinelCLI(t, sentinel, "SENTINEL", "FAILOVER", "m")
	deadline := time.Now().Add(20 * time.Second)
	for !servedBy(ctx, client, replica) || !strings.HasPrefix(replica.MustCLI(t, "ROLE"), "master") {
		if time.Now().After(deadline) {
			t.Fatalf("no failover to the replica within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Claims for a while, so that several re-checks see the new primary.
	for i := range 30 {
		w := harness.Do(h, harness.UniqueKey(t, fmt.Sprint("after-", i)))
		if w.Code != http.StatusCreated {
			t.Fatalf("after the failover: %d %s\nlog:\n%s", w.Code, w.Body, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range before {
		if w := harness.Do(h, k); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" || runs.runs(k) != 1 {
			t.Fatalf("a charge completed before the failover: %d, replayed %q, %d runs", w.Code, w.Header().Get("Idempotent-Replayed"), runs.runs(k))
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "failover") {
		t.Errorf("want the failover logged as one, and no alarm:\n%s", logs.String())
	}
	t.Log(logs.String())
}

// servedBy reports whether client's connections go to srv now.
func servedBy(ctx context.Context, client *redis.Client, srv *harness.RedisServer) bool {
	info, err := client.Info(ctx, "server").Result()
	return err == nil && strings.Contains(info, "tcp_port:"+strconv.Itoa(srv.Port)+"\r")
}

// startSentinel starts a Sentinel (redis-server --sentinel) that monitors
// primary as "m" with a quorum of one, and waits until it knows a replica.
func startSentinel(t *testing.T, primary *harness.RedisServer) (addr string) {
	t.Helper()
	dir := t.TempDir()
	port := freeLoopbackPort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor m 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds m 2000\nsentinel failover-timeout m 10000\n", port, dir, primary.Port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Skipf("redis-server --sentinel: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr = "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "SENTINEL", "REPLICAS", "m").CombinedOutput()
		if err == nil && strings.Contains(string(out), "slave") && !strings.Contains(string(out), "s_down") &&
			!strings.Contains(string(out), "disconnected") {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel knows no healthy replica of m: %s %v", out, err)
		}
	}
}

func sentinelCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil || strings.HasPrefix(string(out), "ERR") || strings.HasPrefix(string(out), "NOGOOD") {
		t.Fatalf("redis-cli %v: %s %v", args, out, err)
	}
	return string(out)
}

// freeLoopbackPort is a loopback TCP port free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
