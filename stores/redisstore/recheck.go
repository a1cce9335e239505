package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRecheckInterval is how often Claim has every node's
// maxmemory-policy read again after New when Options.RecheckInterval is
// zero.
const DefaultRecheckInterval = 5 * time.Second

// recheckTimeout bounds one re-check of the servers' settings.
const recheckTimeout = 5 * time.Second

// ErrEvictingPolicy is returned (wrapped, naming the node and its policy)
// by New, and by Claim once a re-check has found it, when a Redis node's
// maxmemory-policy is not noeviction: every record has a TTL, so the
// server would delete records when memory runs out, and a key whose record
// is gone runs its handler again.
var ErrEvictingPolicy = errors.New("idempotency store: a Redis node's maxmemory-policy evicts keys")

// policyError is ErrEvictingPolicy for one node.
type policyError struct{ node, policy string }

func (e *policyError) Error() string {
	return fmt.Sprintf("idempotency store: the Redis %s has maxmemory-policy %s, which deletes keys when memory runs out: "+
		"every idempotency record has a TTL, so it would delete records, and a key whose record is gone runs its handler again; "+
		"set maxmemory-policy noeviction (redis.conf, CONFIG SET maxmemory-policy noeviction, or the managed service's parameter); "+
		"a full Redis then refuses new claims (503) instead", e.node, e.policy)
}

func (e *policyError) Unwrap() error { return ErrEvictingPolicy }

// rechecker re-reads, after New, the maxmemory-policy of the server (every
// node of a cluster, replicas included): New refuses an evicting policy,
// but an operator's CONFIG SET, a managed service's parameter change or a
// Sentinel failover to a server configured otherwise can bring one in
// later, and records would then be evicted without a word. While the
// latest re-check found one, Claim refuses every claim (the wrapper
// answers 503): a claim granted now could be forgotten. Re-checks run in
// the background, at most one at a time, started by a Claim when one is
// due, so no claim waits for one.
type rechecker struct {
	every     time.Duration // <= 0: never
	mu        sync.Mutex
	next      time.Time // when the next re-check is due
	running   bool
	refusal   error // the latest re-check's verdict
	check     func(ctx context.Context) error
	onRefusal func(err error, refusing bool)
}

// err returns the latest re-check's refusal, starting a re-check when one
// is due.
func (r *rechecker) err() error {
	if r.every <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); !r.running && !now.Before(r.next) {
		r.running, r.next = true, now.Add(r.every)
		go r.run()
	}
	return r.refusal
}

// run re-checks once. An error other than an evicting policy (the server
// did not answer) keeps the previous verdict: the claims' own calls
// report that.
func (r *rechecker) run() {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	err := r.check(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	switch {
	case errors.Is(err, ErrEvictingPolicy):
		if r.refusal == nil {
			r.onRefusal(err, true)
		}
		r.refusal = err
	case err == nil:
		if r.refusal != nil {
			r.onRefusal(nil, false)
		}
		r.refusal = nil
	}
}

// checkPolicies reads the maxmemory-policy of the store's server, or of
// every node of its cluster.
func (s *Store) checkPolicies(ctx context.Context) error {
	if s.cluster != nil {
		return s.cluster.ForEachShard(ctx, checkPolicy)
	}
	return checkPolicy(ctx, s.single)
}

// checkPolicy reads one node's maxmemory-policy (INFO memory, which works
// where CONFIG is disabled).
func checkPolicy(ctx context.Context, c *redis.Client) error {
	text, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return checkError(c.Options().Addr, "INFO", err)
	}
	if p := parseInfo(text)["maxmemory_policy"]; p != "" && p != "noeviction" {
		return &policyError{node: "server " + c.Options().Addr, policy: p}
	}
	return nil
}
