package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRecheckInterval is how often Claim has every node's settings read
// again after New when Options.RecheckInterval is zero.
const DefaultRecheckInterval = 5 * time.Second

// recheckTimeout bounds one re-check of the servers' settings.
const recheckTimeout = 5 * time.Second

// defaultLease is the lease assumed for claims granted before the restart
// of a node when this store has granted none yet (the contract's default).
const defaultLease = 60 * time.Second

// ErrEvictingPolicy is returned (wrapped, naming the node and its policy)
// by New, and by Claim once a re-check has found it, when a Redis node's
// maxmemory-policy is not noeviction: every record has a TTL, so the
// server would delete records when memory runs out, and a key whose record
// is gone runs its handler again.
var ErrEvictingPolicy = errors.New("idempotency store: a Redis node's maxmemory-policy evicts keys")

// ErrRestartedEmpty is returned (wrapped, naming the node) by Claim while
// the leases that a node restarted without an append-only file (or that
// lost its records otherwise: flushed, or replaced by a replica that did
// not have them) may have lost could still be running: the claims in
// progress on it are gone, and a retry of one would run its handler beside
// the first attempt.
var ErrRestartedEmpty = errors.New("idempotency store: a Redis node restarted without persistence or lost its records otherwise; refusing claims until the leases it lost have ended")

// policyError is ErrEvictingPolicy for one node.
type policyError struct{ node, policy string }

func (e *policyError) Error() string {
	return fmt.Sprintf("idempotency store: the Redis %s has maxmemory-policy %s, which deletes keys when memory runs out: "+
		"every idempotency record has a TTL, so it would delete records, and a key whose record is gone runs its handler again; "+
		"set maxmemory-policy noeviction (redis.conf, CONFIG SET maxmemory-policy noeviction, or the managed service's parameter); "+
		"a full Redis then refuses new claims (503) instead", e.node, e.policy)
}

func (e *policyError) Unwrap() error { return ErrEvictingPolicy }

// rechecker re-reads, after New, the settings of the server (every node of
// a cluster, replicas included) that can lose records without an error:
//   - the maxmemory-policy: New refuses an evicting one, but an operator's
//     CONFIG SET, a managed service's parameter change or a Sentinel
//     failover to a server configured otherwise can bring one in later.
//     While the latest re-check found one, Claim refuses every claim.
//   - a restart (INFO's run_id changed) of a node without an append-only
//     file: it came back without its records. The completed ones are lost
//     (their keys run again); the claims in progress are lost too, and a
//     retry would run its handler beside the first attempt, so Claim
//     refuses every claim until the node has been up for the longest lease
//     this store has granted (defaultLease before any). The claim script's
//     marker (marker.go) finds a node emptied from the first claim on; the
//     re-check also finds a restart from an RDB snapshot, which keeps the
//     marker. A new run_id at an address that is a failover, not a restart
//     (failedOver: a Sentinel client's primary replaced by its replica),
//     is logged at info level and refuses nothing.
//
// Each finding is logged once (Options.Logger). Re-checks run in the
// background, at most one at a time, started by a Claim when one is due,
// so no claim waits for one.
type rechecker struct {
	every    time.Duration // <= 0: never
	log      *slog.Logger
	maxLease time.Duration // the longest lease of a claim this store was asked for

	mu      sync.Mutex
	next    time.Time // when the next re-check is due
	running bool
	refusal error // the policy verdict: the first of evicting
	// evicting is each node's evicting policy (a *policyError; nil for
	// noeviction) as it last answered: a node that did not answer keeps
	// its verdict, a node no longer in the cluster loses it.
	evicting map[string]error
	seen     map[string]seenNode // each node's latest answer
	restart  error               // the latest restart without persistence
	until    time.Time           // claims are refused until then for restart
	// lossLogged is the end of the refusal window of the latest loss of
	// records logged (a restart found here or a marker found absent by a
	// claim), so that one loss is logged once, not by each claim refused
	// or by both ways of finding it; resumeLogged: its end was logged.
	lossLogged   time.Time
	resumeLogged bool
}

// seenNode is a node's latest answer to a re-check and when it came.
type seenNode struct {
	nodeState
	at time.Time
}

// window is the refusal window after a loss of records that a claim with
// lease finds: the longest lease this store was asked for.
func (r *rechecker) window(lease time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxLease = max(r.maxLease, lease)
	return r.maxLease
}

// lost logs, with logf, a loss of records whose refusal window ends in
// wait, unless the loss being refused now was logged already.
func (r *rechecker) lost(wait time.Duration, logf func(*slog.Logger)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.logLoss(now, now.Add(wait), logf)
}

// logLoss logs, with logf, a loss of records found at now whose refusal
// window ends at until, unless the loss being refused at now was logged
// already (by a claim or by a re-check). r.mu is held.
func (r *rechecker) logLoss(now, until time.Time, logf func(*slog.Logger)) {
	if now.Before(r.lossLogged) {
		return
	}
	r.lossLogged, r.resumeLogged = until, false
	logf(r.log)
}

// resumed logs, once per loss logged, that a claim ended a refusal window.
// The claim script decided it on the server's clock: lossLogged, this
// store's estimate of the window's end, may still be a round trip ahead.
func (r *rechecker) resumed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lossLogged.IsZero() || r.resumeLogged {
		return
	}
	r.resumeLogged = true
	r.log.Info("idempotency store: the refusal window after a loss of records has ended; claims resume")
}

// err returns why claims are refused now (nil: they are not), starting a
// re-check when one is due. lease is the claim's.
func (r *rechecker) err(lease time.Duration, check func(context.Context) (map[string]nodeState, error)) error {
	if r.every <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.running && !now.Before(r.next) {
		r.running, r.next = true, now.Add(r.every)
		go r.run(check)
	}
	if r.refusal != nil {
		return r.refusal
	}
	if now.Before(r.until) {
		return r.restart
	}
	return nil
}

// nodeState is what a re-check reads of one node; the zero value (no
// run_id) is a node that did not answer.
type nodeState struct {
	runID    string
	uptime   time.Duration
	aof      bool
	primary  bool
	evicting error // a *policyError, nil for noeviction
	// INFO replication: master_replid, master_replid2,
	// master_repl_offset, second_repl_offset.
	replID, replID2      string
	offset, secondOffset int64
}

// run re-checks once. A node that did not answer keeps its previous
// verdict (a standalone server's claims report that it does not answer),
// so that on a cluster with a node down the verdict follows the others:
// one cluster-wide error hid an evicting node behind another's timeout,
// and kept a refusal after the evicting node was set back to noeviction.
func (r *rechecker) run(check func(context.Context) (map[string]nodeState, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	nodes, _ := check(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	r.observe(nodes, time.Now())
	if r.evicting == nil {
		r.evicting = map[string]error{}
	}
	// A node not asked left the cluster, unless none was asked (the
	// cluster's state could not be read): then nothing is known.
	for addr := range r.evicting {
		if _, ok := nodes[addr]; !ok && len(nodes) > 0 {
			delete(r.evicting, addr)
		}
	}
	for addr, n := range nodes {
		if n.runID != "" {
			r.evicting[addr] = n.evicting
		}
	}
	var refusal error
	for _, addr := range slices.Sorted(maps.Keys(r.evicting)) {
		if refusal = r.evicting[addr]; refusal != nil {
			break
		}
	}
	switch {
	case refusal != nil && r.refusal == nil:
		r.log.Error("idempotency store: refusing every claim (503) until maxmemory-policy is noeviction again", "err", refusal)
	case refusal == nil && r.refusal != nil:
		r.log.Info("idempotency store: maxmemory-policy is noeviction again; claims resume")
	}
	r.refusal = refusal
}

// observe notes each node's answer (the first time: the baseline) and,
// for a primary that restarted without an append-only file, refuses
// claims until it has been up for the longest lease.
func (r *rechecker) observe(nodes map[string]nodeState, now time.Time) {
	if r.seen == nil {
		r.seen = map[string]seenNode{}
	}
	for addr, n := range nodes {
		if n.runID == "" {
			continue // it did not answer
		}
		prev, seen := r.seen[addr]
		r.seen[addr] = seenNode{n, now}
		// A replica that restarted resynchronised from its primary: it
		// lost nothing the cluster acknowledged.
		if !seen || prev.runID == n.runID || n.aof || !n.primary {
			continue
		}
		if failedOver(prev, n, now) {
			r.log.Info("idempotency store: the Redis primary is another server now (a failover): it continues the previous primary's "+
				"replication from where the re-check last saw it, so it has the records acknowledged until then", "addr", addr,
				"run_id", n.runID, "previous_run_id", prev.runID)
			continue
		}
		r.restarted(addr, n, now)
	}
}

// failedOver reports whether n, a primary with another run_id than prev
// had at the same address (a Sentinel client's address is the master's
// name), is a server promoted in a failover rather than prev's server
// restarted: it has been up since before prev's reading (INFO counts the
// uptime in whole seconds, so more whole seconds than have passed), and
// its data continues the replication stream prev saw, from at least where
// prev was: prev was its replica (same replication ID, prev's offset
// reached), or it is prev's replica promoted (prev's ID is its previous
// one, master_replid2, and it took over after prev's offset). A primary
// restarted from an RDB snapshot also has the old ID as its previous one,
// from the snapshot's offset, but has not been up for long; a replica
// promoted before it had synchronised has another previous ID. Both are
// losses, not failovers.
func failedOver(prev seenNode, n nodeState, now time.Time) bool {
	if n.uptime <= now.Sub(prev.at) || prev.replID == "" {
		return false
	}
	return n.replID == prev.replID && n.offset >= prev.offset ||
		n.replID2 == prev.replID && n.secondOffset > prev.offset
}

// restarted refuses claims until the primary at addr, which restarted
// without an append-only file, has been up for the longest lease, and
// logs it unless a loss of records was logged for the window already (a
// claim finding its marker absent).
func (r *rechecker) restarted(addr string, n nodeState, now time.Time) {
	lease := r.maxLease
	if lease <= 0 {
		lease = defaultLease
	}
	// INFO counts the uptime in whole seconds of two truncated
	// clocks: the node may have been up for up to a second less.
	until := now.Add(lease - max(n.uptime-time.Second, 0))
	r.restart = fmt.Errorf("%w: the Redis server %s restarted (its run_id changed) without an append-only file: "+
		"it came back without the records written since its last RDB snapshot (all of them without one); their keys run again, "+
		"and claims are refused until the leases it lost have ended (%s after the restart); set appendonly yes", ErrRestartedEmpty, addr, lease)
	if until.After(r.until) {
		r.until = until
	}
	r.logLoss(now, until, func(log *slog.Logger) {
		log.Error("idempotency store: a Redis node restarted without persistence; acknowledged records are lost, "+
			"and every claim is refused (503) until the leases it lost have ended", "addr", addr, "refusing_for", until.Sub(now).Round(time.Millisecond))
	})
}

// checkNodes reads the maxmemory-policy, run_id, uptime and persistence
// of the store's server, or of every node of its cluster: each node it
// asked, the zero nodeState for one that did not answer, and the first
// error of those.
func (s *Store) checkNodes(ctx context.Context) (map[string]nodeState, error) {
	var mu sync.Mutex
	nodes := map[string]nodeState{}
	check := func(ctx context.Context, c *redis.Client) error {
		n, err := checkNode(ctx, c)
		mu.Lock()
		nodes[c.Options().Addr] = n
		mu.Unlock()
		return err
	}
	if s.cluster != nil {
		err := s.cluster.ForEachShard(ctx, check)
		return nodes, err
	}
	return nodes, check(ctx, s.single)
}

// checkNode reads one node's settings (INFO, which works where CONFIG is
// disabled); an evicting maxmemory-policy is in the state (evicting), not
// an error.
func checkNode(ctx context.Context, c *redis.Client) (nodeState, error) {
	text, err := c.Info(ctx, "server", "memory", "persistence", "replication").Result()
	if err != nil {
		return nodeState{}, checkError(c.Options().Addr, "INFO", err)
	}
	info := parseInfo(text)
	secs, _ := strconv.ParseInt(info["uptime_in_seconds"], 10, 64)
	n := nodeState{runID: info["run_id"], uptime: time.Duration(secs) * time.Second, aof: info["aof_enabled"] == "1",
		primary: info["role"] == "master", replID: info["master_replid"], replID2: info["master_replid2"]}
	n.offset, _ = strconv.ParseInt(info["master_repl_offset"], 10, 64)
	n.secondOffset, _ = strconv.ParseInt(info["second_repl_offset"], 10, 64)
	if p := info["maxmemory_policy"]; p != "" && p != "noeviction" {
		n.evicting = &policyError{node: "server " + c.Options().Addr, policy: p}
	}
	return n, nil
}
