package harness

// Private Redis servers: each test starts its own redis-server processes on
// free loopback ports, in temporary folders, and kills them in its cleanup.
// The machine's shared Redis is never touched.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisEnv makes a missing redis-server fail the Redis tests instead of
// skipping them (.ci/run sets it).
const RedisEnv = "IDEMGEN_TEST_REDIS"

// redisServerBin finds redis-server (and redis-cli): it skips t when they
// are not installed, or fails t when RedisEnv is set.
func redisServerBin(t testing.TB) (server, cli string) {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		if os.Getenv(RedisEnv) != "" {
			t.Fatalf("%s is set but redis-server or redis-cli is not installed (%v, %v)", RedisEnv, err1, err2)
		}
		t.Skip("redis-server is not installed (set " + RedisEnv + "=1 to fail instead)")
	}
	return server, cli
}

// RedisServer is one private redis-server process.
type RedisServer struct {
	Port int
	dir  string
	bin  string
	cli  string
	args []string
	proc *process
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartRedis starts a redis-server with no persistence on a free loopback
// port, with extra configuration args ("--name", "value" pairs), and stops
// it at the end of t.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, cli := redisServerBin(t)
	s := &RedisServer{Port: freePort(t), dir: privateDir(t, "idemgen-redis-"), bin: bin, cli: cli, args: args}
	s.start(t)
	t.Cleanup(s.Kill)
	return s
}

// start launches the server on its first port. freePort's port (or a
// cluster node's --cluster-port) may be taken by another process
// between the check and redis-server's bind, e.g. as the source port of a
// connection of a test running beside this one: start then tries again on
// another free port, a few times.
func (s *RedisServer) start(t testing.TB) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return
		}
		if attempt == 5 || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatal(err)
		}
		s.Port = freePort(t)
		for i, a := range s.args {
			if a == "--cluster-port" && i+1 < len(s.args) {
				s.args[i+1] = strconv.Itoa(freePort(t))
			}
		}
		// A node that failed to bind may have written its cluster
		// configuration with the old ports: a fresh node starts without.
		_ = os.Remove(filepath.Join(s.dir, "nodes.conf"))
	}
}

// launch starts the server process and waits until it answers PING.
func (s *RedisServer) launch() error {
	args := append([]string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	ready := func() bool {
		out, err := s.CLI("PING")
		return err == nil && out == "PONG"
	}
	p, err := startProcess(exec.Command(s.bin, args...), fmt.Sprintf("redis-server on port %d", s.Port), filepath.Join(s.dir, "redis.log"), ready)
	if p != nil {
		s.proc = p
	}
	return err
}

// Restart starts a killed server again on its port and folder (a cluster
// node keeps its nodes.conf and rejoins).
func (s *RedisServer) Restart() error { return s.launch() }

// Kill kills the server with SIGKILL (kill -9) and waits for it to exit.
func (s *RedisServer) Kill() {
	if s.proc != nil {
		s.proc.kill()
	}
}

// CLI runs redis-cli against the server and returns its trimmed output.
func (s *RedisServer) CLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// MustCLI is CLI that fails t on an error.
func (s *RedisServer) MustCLI(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.CLI(args...)
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return out
}

// RedisCluster is a private Redis Cluster.
type RedisCluster struct {
	Nodes []*RedisServer
}

// Addrs lists every node's host:port.
func (c *RedisCluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// clusterNodeTimeout is the cluster's node timeout: a killed primary's
// replica is promoted a second or two after it.
const clusterNodeTimeout = "1000"

// StartRedisCluster starts a Redis Cluster of primaries primaries with
// replicas replicas each (primaries 1 with replicas 0, or at least 3 as
// redis-cli --cluster create wants) and waits until every node reports
// cluster_state:ok.
func StartRedisCluster(t testing.TB, primaries, replicas int) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	for range primaries * (1 + replicas) {
		c.Nodes = append(c.Nodes, StartRedis(t,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout, "--cluster-port", strconv.Itoa(freePort(t)),
			"--cluster-require-full-coverage", "no"))
	}
	if primaries == 1 && replicas == 0 {
		c.Nodes[0].MustCLI(t, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
	} else {
		args := append([]string{"--cluster", "create"}, c.Addrs()...)
		args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
		c.Nodes[0].MustCLI(t, args...)
	}
	c.WaitOK(t)
	c.waitReplicas(t, replicas)
	return c
}

// waitReplicas waits until every primary has n replicas online.
func (c *RedisCluster) waitReplicas(t testing.TB, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	deadline := time.Now().Add(serverTimeout)
	for _, node := range c.Nodes {
		for {
			out := node.MustCLI(t, "INFO", "replication")
			if !strings.Contains(out, "role:master") ||
				(strings.Contains(out, "connected_slaves:"+strconv.Itoa(n)) && strings.Count(out, "state=online") == n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not have %d replicas online:\n%s", node.Addr(), n, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// WaitOK waits until every live node reports cluster_state:ok and agrees
// on the slot map (redis-cli --cluster check passes).
func (c *RedisCluster) WaitOK(t testing.TB) {
	t.Helper()
	if err := c.Settled(); err != nil {
		t.Fatal(err)
	}
}

// Settled is WaitOK returning its failure instead (for goroutines).
func (c *RedisCluster) Settled() error {
	deadline := time.Now().Add(serverTimeout)
	for {
		ok := true
		var last string
		for _, n := range c.Nodes {
			if n.proc.exited() {
				continue // killed
			}
			out, err := n.CLI("CLUSTER", "INFO")
			if err != nil || !strings.Contains(out, "cluster_state:ok") {
				ok, last = false, fmt.Sprintf("%s: %v %s", n.Addr(), err, out)
				break
			}
			if out, err := n.CLI("--cluster", "check", n.Addr()); err != nil || !strings.Contains(out, "[OK] All 16384 slots covered") || strings.Contains(out, "[ERR]") {
				ok, last = false, out
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Redis Cluster did not settle: %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Primaries returns the nodes that are primaries now, with their cluster
// node ids.
func (c *RedisCluster) Primaries(t testing.TB) map[string]*RedisServer {
	t.Helper()
	byAddr := map[string]*RedisServer{}
	var live *RedisServer
	for _, n := range c.Nodes {
		byAddr[n.Addr()] = n
		if !n.proc.exited() {
			live = n
		}
	}
	out := map[string]*RedisServer{}
	sc := bufio.NewScanner(strings.NewReader(live.MustCLI(t, "CLUSTER", "NODES")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if n := byAddr[addr]; n != nil {
			out[f[0]] = n
		}
	}
	return out
}

// Reshard moves slots slots from the primary from to the primary to (node
// ids) with redis-cli --cluster reshard.
func (c *RedisCluster) Reshard(t testing.TB, from, to string, slots int) {
	t.Helper()
	c.Nodes[0].MustCLI(t, "--cluster", "reshard", c.Nodes[0].Addr(),
		"--cluster-from", from, "--cluster-to", to, "--cluster-slots", strconv.Itoa(slots),
		"--cluster-yes", "--cluster-pipeline", "100")
}
