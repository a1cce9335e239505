// Package redisstore keeps idempotency records in Redis 7, standalone or
// Redis Cluster, through github.com/redis/go-redis/v9.
//
// Each record is one hash at a hash-tagged key, prefix + "{" + SHA-256 of
// (scope, principal hash, key) + "}", so it lives in one cluster hash slot.
// Claims, completions and releases are Lua scripts: each is one atomic step
// on the server, fenced by the record's epoch, and every lease and TTL
// decision uses the server's clock (TIME in the script). Records expire by
// PEXPIRE, so Redis reclaims them itself: Sweep deletes nothing and returns
// 0, and RunSweeper is not needed.
//
// The store is not a TxStore: a Redis write cannot commit in the handler's
// database transaction, so operations with transactional: true are refused
// when the wrapper is built (idemrt.Wrap / New). MarkProcessed (message
// consumers) needs that transaction too and is not offered.
//
// Redis acknowledges a write before its replicas have it; see
// Options.WaitReplicas and docs/stores.md for what a failover can forget.
//
// New refuses a server that would delete records by itself: any
// maxmemory-policy but noeviction; after New, Claim refuses every claim
// while a periodic re-check finds one (Options.RecheckInterval). Every
// claim also checks a marker key of its node that New writes (marker.go):
// a node that lost its records (restarted without persistence, flushed)
// has none, and its claims are refused (ErrRestartedEmpty) for a lease.
// When memory is full, a claim is refused
// before the handler runs (ErrOutOfMemory: the wrapper answers 503), while
// completions and releases of claims already granted still run; see
// scripts.go.
package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/storekit"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix begins every record's Redis key when Options.Prefix is empty.
const DefaultPrefix = "idem:"

// DefaultWaitTimeout is the WAIT timeout when Options.WaitReplicas is set
// and Options.WaitTimeout is zero.
const DefaultWaitTimeout = time.Second

// Options configures a Store.
type Options struct {
	// Prefix begins every record's key (DefaultPrefix when empty).
	Prefix string
	// WaitReplicas, when positive, makes the store acknowledge a claim it
	// acquired and a completion only after WAIT reports that at least this
	// many replicas of the record's primary have them, within WaitTimeout.
	// With fewer the call fails (a store error: the wrapper answers 503 for
	// a claim, and the client retries), so a failover to one of those
	// replicas cannot forget a claim whose handler ran. WAIT counts writes a
	// replica received, not ones it wrote to disk: see docs/stores.md for
	// the appendfsync setting this assumes. Zero: plain Redis
	// acknowledgement (the primary's memory only).
	WaitReplicas int
	// WaitTimeout bounds each WAIT (DefaultWaitTimeout when zero). Keep it
	// well below the wrapper's StoreTimeout.
	WaitTimeout time.Duration
	// AllowNoAppendOnly lets WAIT mode start on a primary without an
	// append-only file (appendonly no), which New otherwise refuses: such
	// a primary, killed and restarted before its replica is promoted,
	// comes back without the records written since its last RDB snapshot
	// (all of them without one), its replicas resynchronise to that, and
	// acknowledged keys run again. Set it only when nothing restarts a
	// primary automatically (the replica is promoted first, and the old
	// primary rejoins as a replica). In plain mode New only warns (Logger),
	// and not at all when this is set.
	AllowNoAppendOnly bool
	// RecheckInterval is how often, after New, the store reads every
	// node's maxmemory-policy and run_id again (DefaultRecheckInterval when
	// zero; negative: never). While the latest re-check found an evicting
	// policy (set by CONFIG SET, a managed service's parameter or a
	// failover after New), Claim refuses every claim with ErrEvictingPolicy
	// (503), and the store logs it once (Logger); it resumes when a
	// re-check finds noeviction again. When a node restarted without an
	// append-only file (its run_id changed), the store logs it and Claim
	// refuses every claim with ErrRestartedEmpty until the node has been up
	// for the longest lease the store has granted: the claims in progress
	// it lost cannot run beside a retry. A new run_id of a server that has
	// the previous one's data (a Sentinel failover to a replica) is logged
	// as a failover and refuses nothing. An evicting policy set between two
	// re-checks can delete records in the meantime: the interval bounds how
	// long it goes unnoticed. A node emptied meanwhile (restarted without
	// persistence, flushed) is no such gap: each claim checks its node's
	// marker (marker.go) and is refused from the first one on.
	RecheckInterval time.Duration
	// Logger receives New's warnings and the re-checks' findings (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// ErrNotReplicated is returned (wrapped) by Claim and Complete in WAIT mode
// when fewer than Options.WaitReplicas replicas acknowledged the write in
// time. The write may still be on the primary: a claim stays in progress
// until its lease ends, a completion may or may not replay.
var ErrNotReplicated = errors.New("idempotency store: the write did not reach enough Redis replicas in time")

// ErrOutOfMemory is returned (wrapped, with the server's OOM error) by Claim
// when the record's server is over its maxmemory and the key would need a
// new claim: Redis refused the claim before it ran, so no handler runs (the
// wrapper answers 503 with Retry-After). A key that is in progress or
// completed is still answered (409, replay) from a read-only script.
var ErrOutOfMemory = errors.New("idempotency store: Redis is out of memory (used memory > maxmemory); no new claim is granted until records expire")

// Store keeps idempotency records in Redis. It implements idemrt.Store.
//
// Round trips: a first request costs two (claim, completion), a replay or
// a conflict one; in WAIT mode a claim that acquires and a completion cost
// one more each (the WAIT).
type Store struct {
	client  redis.UniversalClient
	single  *redis.Client        // the client when it is not a cluster client
	cluster *redis.ClusterClient // the client when it is one
	prefix  string
	marker  string // a standalone server's marker (marker.go)
	waitN   int
	waitFor time.Duration
	// recheck re-reads the servers' maxmemory-policy and run_id (recheck.go).
	recheck  rechecker
	identity string // see StoreIdentity
}

var _ idemrt.Store = (*Store)(nil)

// New returns a store over client: a *redis.Client (standalone or Sentinel
// failover) or a *redis.ClusterClient. It checks the server (every node of
// a cluster, replicas too, since a failover promotes them), reading ROLE
// and INFO only (so it works where CONFIG is disabled), and refuses
//   - a server older than Redis 7.0 (the scripts use its script flags);
//   - a replica (a plain client's server; a cluster's replicas are checked
//     for the settings below, WaitReplicas's count aside);
//   - a maxmemory-policy other than noeviction: every record has a TTL, so
//     every other policy evicts records when memory runs out, and an
//     evicted record's key runs its handler again;
//   - in WAIT mode, a primary with fewer connected replicas than
//     Options.WaitReplicas, or without an append-only file unless
//     Options.AllowNoAppendOnly (in plain mode it warns on Options.Logger).
//
// For Options.StoreTimeout of the wrapper to
// bound every call, create the client with ContextTimeoutEnabled (NewClient
// does).
func New(ctx context.Context, client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("idempotency store: nil Redis client")
	}
	if opts.WaitReplicas < 0 {
		return nil, fmt.Errorf("idempotency store: WaitReplicas %d is negative", opts.WaitReplicas)
	}
	s := &Store{client: client, prefix: opts.Prefix, waitN: opts.WaitReplicas, waitFor: opts.WaitTimeout}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	s.marker = s.prefix + "marker"
	if s.waitFor <= 0 {
		s.waitFor = DefaultWaitTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	switch c := client.(type) {
	case *redis.Client:
		s.single = c
		if err := checkPrimary(ctx, c, opts, log); err != nil {
			return nil, err
		}
		if err := checkNotCluster(ctx, c); err != nil {
			return nil, err
		}
	case *redis.ClusterClient:
		s.cluster = c
		if err := checkCluster(ctx, c, opts, log); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("idempotency store: unsupported Redis client %T (want *redis.Client or *redis.ClusterClient)", client)
	}
	if err := s.writeMarkers(ctx); err != nil {
		return nil, fmt.Errorf("idempotency store: writing the markers that claims check (a node that lost its records has none): %w", err)
	}
	s.identity = identity(client, s.prefix)
	s.recheck.every, s.recheck.log = opts.RecheckInterval, log
	if s.recheck.every == 0 {
		s.recheck.every = DefaultRecheckInterval
	}
	if s.recheck.every > 0 {
		// The baseline the re-checks compare run_ids with.
		nodes, _ := s.checkNodes(ctx)
		s.recheck.observe(nodes, time.Now())
		s.recheck.next = time.Now().Add(s.recheck.every)
	}
	return s, nil
}

// StoreIdentity names the records the store keeps (idemrt.StoreIdentifier):
// the server's address and database, or the cluster's seed addresses
// (sorted), and the key prefix; "" (unknown: the runtime compares Store
// values instead) for a Sentinel failover client, whose primary moves. Two
// stores with one identity are one store to the runtime, so that it knows
// a wrapper mounted inside another one over the same records.
func (s *Store) StoreIdentity() string { return s.identity }

func identity(client redis.UniversalClient, prefix string) string {
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" { // go-redis's name for it
			return ""
		}
		return fmt.Sprintf("redis:%s/%d/%s", o.Addr, o.DB, prefix)
	case *redis.ClusterClient:
		addrs := slices.Sorted(slices.Values(c.Options().Addrs))
		return "redis-cluster:" + strings.Join(addrs, ",") + "/" + prefix
	}
	return ""
}

// checkPrimary refuses a replica, an evicting maxmemory-policy, and in
// WAIT mode a primary with fewer than opts.WaitReplicas connected replicas
// or without an append-only file (unless opts.AllowNoAppendOnly); in plain
// mode it warns on log about the latter.
func checkPrimary(ctx context.Context, c *redis.Client, opts Options, log *slog.Logger) error {
	role, err := serverRole(ctx, c)
	if err != nil {
		return err
	}
	if len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("idempotency store: the Redis server %s is a replica (ROLE says %v); claims must be made on the primary", c.Options().Addr, role)
	}
	return checkSettings(ctx, c, opts, log, true)
}

// checkCluster checks every primary of the cluster c (checkPrimary), and
// the settings of every replica, which a failover makes a primary. It
// finds the replicas in each primary's CLUSTER NODES, not in the client's
// view: CLUSTER SLOTS, from which go-redis learns the nodes, leaves out a
// replica that has replicated nothing yet, as on a new cluster.
func checkCluster(ctx context.Context, c *redis.ClusterClient, opts Options, log *slog.Logger) error {
	var mu sync.Mutex
	replicas := map[string]bool{}
	var base redis.Options
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		if err := checkPrimary(ctx, node, opts, log); err != nil {
			return err
		}
		nodes, err := node.ClusterNodes(ctx).Result()
		if err != nil {
			return checkError(node.Options().Addr, "CLUSTER NODES", err)
		}
		mu.Lock()
		defer mu.Unlock()
		base = *node.Options()
		for _, addr := range clusterReplicas(nodes) {
			replicas[addr] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, addr := range slices.Sorted(maps.Keys(replicas)) {
		o := base
		o.Addr = addr
		rc := redis.NewClient(&o)
		err := checkSettings(ctx, rc, opts, log, false)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// clusterReplicas returns the host:port of each replica that a CLUSTER
// NODES reply lists as reachable (not failed, suspected, in handshake or
// without an address).
func clusterReplicas(nodes string) []string {
	var out []string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "slave") || slices.ContainsFunc(flags, func(fl string) bool {
			return strings.HasPrefix(fl, "fail") || fl == "handshake" || fl == "noaddr"
		}) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		i := strings.LastIndexByte(addr, ':')
		if i <= 0 || addr[i+1:] == "0" {
			continue
		}
		out = append(out, net.JoinHostPort(addr[:i], addr[i+1:]))
	}
	return out
}

// serverRole returns the server's ROLE reply.
func serverRole(ctx context.Context, c *redis.Client) ([]any, error) {
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return nil, checkError(c.Options().Addr, "ROLE", err)
	}
	return role, nil
}

// checkSettings checks what checkPrimary does but the role, on a primary
// or (primary false) on a replica of a cluster: a failover promotes it,
// so it needs the same maxmemory-policy and, in WAIT mode, persistence.
// It does not count a replica's replicas, and warns about primaries only.
func checkSettings(ctx context.Context, c *redis.Client, opts Options, log *slog.Logger, primary bool) error {
	addr := c.Options().Addr
	node := "server " + addr
	if !primary {
		node = "replica " + addr + " (a failover makes it a primary)"
	}
	text, err := c.Info(ctx, "server", "memory", "persistence", "replication").Result()
	if err != nil {
		return checkError(addr, "INFO", err)
	}
	info := parseInfo(text)
	if err := checkVersion(addr, info["redis_version"]); err != nil {
		return err
	}
	switch policy, ok := info["maxmemory_policy"]; {
	case !ok:
		return fmt.Errorf("idempotency store: checking the Redis server %s: INFO memory reports no maxmemory_policy", addr)
	case policy != "noeviction":
		return &policyError{node: node, policy: policy}
	}
	if opts.WaitReplicas > 0 && primary {
		n, err := strconv.Atoi(info["connected_slaves"])
		if err != nil {
			n = 0
		}
		if n < opts.WaitReplicas {
			return fmt.Errorf("idempotency store: the Redis primary %s has %d connected replicas, WaitReplicas asks for %d", addr, n, opts.WaitReplicas)
		}
	}
	if info["aof_enabled"] == "1" || opts.AllowNoAppendOnly {
		return nil
	}
	const lost = "has no append-only file (appendonly no): killed and restarted before a failover, it comes back without the " +
		"records written since its last RDB snapshot (all of them without one), its replicas resynchronise to that, and those keys run again"
	if opts.WaitReplicas > 0 {
		if primary {
			node = "primary " + addr
		}
		return fmt.Errorf("idempotency store: the Redis %s %s, which WaitReplicas cannot prevent; "+
			"set appendonly yes on every node (appendfsync always to survive a power loss too), "+
			"or set Options.AllowNoAppendOnly if nothing restarts a primary before its replica is promoted", node, lost)
	}
	if !primary {
		return nil
	}
	log.Warn("idempotency store: the Redis primary "+lost+"; set appendonly yes, or make sure nothing restarts it automatically "+
		"(Options.AllowNoAppendOnly silences this)", "addr", addr)
	return nil
}

// checkError wraps the error of command, one of New's checks. A server
// whose ACL denies it to the store's user (NOPERM) is refused with the rule
// that grants it: New does not start on a server it could not check.
func checkError(addr, command string, err error) error {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM") {
		return fmt.Errorf("idempotency store: checking the Redis server %s: %w; New needs %s (with ROLE and INFO, and CLUSTER NODES on a cluster, "+
			"it checks the role, version, maxmemory-policy and persistence of every node): grant it to this user "+
			"(ACL SETUSER <user> +%s, or the managed service's equivalent)",
			addr, err, command, strings.ReplaceAll(strings.ToLower(command), " ", "|"))
	}
	return fmt.Errorf("idempotency store: checking the Redis server %s: %w", addr, err)
}

// checkVersion refuses a server older than Redis 7: the scripts' flags
// (scripts.go) need 7.0, and an older server would refuse every script.
func checkVersion(addr, version string) error {
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 7 {
		return fmt.Errorf("idempotency store: the Redis server %s reports redis_version %q; the store needs Redis 7.0 or later (its scripts use Redis 7 script flags)", addr, version)
	}
	return nil
}

// parseInfo reads INFO's "field:value" lines.
func parseInfo(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// checkNotCluster refuses a node of a Redis Cluster reached through a
// plain client: it would answer MOVED for every slot it does not hold.
func checkNotCluster(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return checkError(c.Options().Addr, "INFO", err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return fmt.Errorf("idempotency store: the Redis server %s is a Redis Cluster node; use a cluster client (redis-cluster://host:port,...)", c.Options().Addr)
	}
	return nil
}

// Key returns the Redis key of k's record: the prefix, then the SHA-256 of
// the length-prefixed scope, the principal hash and the key, in hex, as the
// hash tag.
func (s *Store) Key(k idemrt.RecordKey) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(k.Scope)))])
	h.Write([]byte(k.Scope))
	h.Write(k.PrincipalHash[:])
	h.Write([]byte(k.Key))
	var sum [sha256.Size]byte
	return s.prefix + "{" + hex.EncodeToString(h.Sum(sum[:0])) + "}"
}

// Claim implements idemrt.Store in one script.
func (s *Store) Claim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	if err := storekit.CheckRecordKey(req.RecordKey); err != nil {
		return idemrt.ClaimResult{}, err
	}
	window := s.recheck.window(req.Lease)
	if err := s.recheck.err(req.Lease, s.checkNodes); err != nil {
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: claim refused: %w", err)
	}
	key := s.Key(req.RecordKey)
	marker := s.markerKey(key)
	v, err := s.run(ctx, claimScript, []string{key, marker}, func(v any) bool { return replyKind(v) == 1 },
		req.Fingerprint[:], req.FingerprintVersion,
		max(storekit.DurationUnits(req.Lease, time.Millisecond), 1), max(storekit.DurationUnits(req.TTL, time.Millisecond), 1),
		max(storekit.DurationUnits(window, time.Millisecond), 1))
	if isOOM(err) {
		// Refused before it ran: answer a key in progress or completed
		// from a script that writes nothing (Redis runs it when full).
		oom := err
		v, err = s.run(ctx, peekScript, []string{key}, func(any) bool { return false })
		if err == nil && replyKind(v) == 0 {
			return idemrt.ClaimResult{}, fmt.Errorf("%w: %w", ErrOutOfMemory, oom)
		}
	}
	if err != nil {
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: claim: %w", err)
	}
	switch a, _ := v.([]any); {
	case replyKind(v) == 4 && len(a) == 3:
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: claim refused: %w", s.lostError(a, marker))
	case replyKind(v) == 1 && len(a) == 4 && a[3] == int64(1):
		s.recheck.resumed()
	}
	res, err := claimResult(v)
	if err != nil {
		return idemrt.ClaimResult{}, fmt.Errorf("idempotency store: claim: %w", err)
	}
	return res, nil
}

// Complete implements idemrt.Store.
func (s *Store) Complete(ctx context.Context, c idemrt.Completion) error {
	cp, err := storekit.CompletionOf(c)
	if err != nil {
		return err
	}
	tomb := "0"
	if cp.Tombstone {
		tomb = "1"
	}
	v, err := s.run(ctx, completeScript, []string{s.Key(c.RecordKey)}, func(v any) bool { return v == int64(1) },
		strconv.FormatInt(c.Epoch, 10), max(storekit.DurationUnits(c.TTL, time.Millisecond), 1), tomb, cp.Status, cp.Headers, cp.Body)
	if err != nil {
		return fmt.Errorf("idempotency store: complete: %w", err)
	}
	if v != int64(1) {
		return idemrt.ErrFenced
	}
	return nil
}

// Release implements idemrt.Store: the key may run again, and the next
// claim continues the epoch. A release is not WAITed for: if a failover
// forgets it, the key stays in progress until its lease ends.
func (s *Store) Release(ctx context.Context, key idemrt.RecordKey, epoch int64) error {
	if err := storekit.CheckRecordKey(key); err != nil {
		return err
	}
	v, err := releaseScript.Run(ctx, s.client, []string{s.Key(key)}, strconv.FormatInt(epoch, 10)).Result()
	if err != nil {
		return fmt.Errorf("idempotency store: release: %w", err)
	}
	if v != int64(1) {
		return idemrt.ErrFenced
	}
	return nil
}

// Sweep deletes nothing and returns 0: records expire by PEXPIRE, and
// Redis reclaims them itself.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) { return 0, ctx.Err() }

// run runs script on keys (of one hash slot). In WAIT mode, when wrote
// reports that the script wrote, it then WAITs on the same connection for
// the replicas.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, wrote func(any) bool, args ...any) (any, error) {
	key := keys[0]
	if s.waitN == 0 {
		for {
			v, err := script.Run(ctx, s.client, keys, args...).Result()
			// A claim names two keys (the record and its marker): in a
			// slot that is being migrated, the importing node answers
			// TRYAGAIN while it has only one of them (a new key's record
			// is on neither node) until the slot's migration ends, longer
			// than go-redis's own retries wait. Try again until ctx ends.
			if s.cluster == nil || !redis.IsTryAgainError(err) {
				return v, err
			}
			if err := pause(ctx, err); err != nil {
				return nil, err
			}
		}
	}
	if s.single != nil {
		return s.runWait(ctx, s.single, script, keys, wrote, args)
	}
	// Cluster: WAIT counts the writes of one connection, so the script and
	// the WAIT go to the key's primary on one connection, not through the
	// cluster client's routing. A MOVED or ASK answer (the slot moved or is
	// moving) reloads the slot map and tries again, until ctx ends.
	for {
		node, err := s.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		v, err := s.runWait(ctx, node, script, keys, wrote, args)
		if err != nil && !isRedisError(err) {
			// The node did not answer (it may have died): have the slot
			// map reloaded in the background, so that a retry finds the
			// replica once it is promoted.
			s.cluster.ReloadState(ctx)
		}
		if !redirected(err) {
			return v, err
		}
		s.cluster.ReloadState(ctx)
		if err := pause(ctx, err); err != nil {
			return nil, err
		}
	}
}

// pause waits before run tries a script again after the answer last: 10
// ms, or until ctx ends (its error, naming last).
func pause(ctx context.Context, last error) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (last answer: %v)", ctx.Err(), last)
	case <-time.After(10 * time.Millisecond):
		return nil
	}
}

// isOOM reports whether err is the server's refusal for memory ("OOM
// command not allowed when used memory > 'maxmemory'").
func isOOM(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// isRedisError reports whether err is an error reply of the server.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func redirected(err error) bool {
	if err == nil {
		return false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsTryAgainError(err) || redis.IsClusterDownError(err)
}

// runWait runs script on one connection of node, then WAITs there if it
// wrote.
func (s *Store) runWait(ctx context.Context, node *redis.Client, script *redis.Script, keys []string, wrote func(any) bool, args []any) (any, error) {
	conn := node.Conn()
	defer conn.Close()
	v, err := script.Run(ctx, conn, keys, args...).Result()
	if err != nil || !wrote(v) {
		return v, err
	}
	n, err := conn.Wait(ctx, s.waitN, s.waitFor).Result()
	if err != nil {
		return nil, fmt.Errorf("WAIT: %w", err)
	}
	if int(n) < s.waitN {
		return nil, fmt.Errorf("%w: %d of %d replicas of %s within %v", ErrNotReplicated, n, s.waitN, node.Options().Addr, s.waitFor)
	}
	return v, nil
}

// replyKind is the first element of a claim script's reply.
func replyKind(v any) int64 {
	if a, ok := v.([]any); ok && len(a) > 0 {
		k, _ := a[0].(int64)
		return k
	}
	return 0
}

var errBadReply = errors.New("unexpected reply from the claim script")

// claimResult decodes the claim script's reply (see claimScript).
func claimResult(v any) (idemrt.ClaimResult, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 3 {
		return idemrt.ClaimResult{}, errBadReply
	}
	epoch, err := strconv.ParseInt(str(a[1]), 10, 64)
	if err != nil {
		return idemrt.ClaimResult{}, errBadReply
	}
	switch replyKind(v) {
	case 1:
		return idemrt.ClaimResult{State: idemrt.Acquired, Epoch: epoch, TakenOver: a[2] == int64(1)}, nil
	case 2:
		if len(a) != 5 {
			return idemrt.ClaimResult{}, errBadReply
		}
		ms, _ := a[4].(int64)
		r := storekit.Record{State: storekit.StateInProgress, Epoch: epoch, Fingerprint: []byte(str(a[2])), LeaseRemaining: time.Duration(ms) * time.Millisecond}
		r.FingerprintVersion, _ = strconv.ParseInt(str(a[3]), 10, 64)
		return r.Result()
	case 3:
		if len(a) != 8 {
			return idemrt.ClaimResult{}, errBadReply
		}
		r := storekit.Record{State: storekit.StateCompleted, Epoch: epoch, Fingerprint: []byte(str(a[2])),
			Headers: []byte(str(a[5])), Body: []byte(str(a[6])), Tombstone: str(a[7]) == "1"}
		r.FingerprintVersion, _ = strconv.ParseInt(str(a[3]), 10, 64)
		r.Status, _ = strconv.ParseInt(str(a[4]), 10, 64)
		return r.Result()
	}
	return idemrt.ClaimResult{}, errBadReply
}

// str is a bulk string of a script reply ("" for nil).
func str(v any) string {
	s, _ := v.(string)
	return s
}
