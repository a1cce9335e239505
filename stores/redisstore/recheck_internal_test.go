package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestRecheckVerdictPerNode: on a cluster with a node that does not answer
// (a replica down), the re-check's verdict on maxmemory-policy follows the
// nodes that do. One node set back to noeviction lets claims resume
// although another is unreachable (the unreachable node's error kept the
// refusal until it answered again); an evicting node is refused although
// another node's error is the one a cluster-wide call reports.
func TestRecheckVerdictPerNode(t *testing.T) {
	unreachable := errors.New("dial tcp 10.0.0.2:6379: connect: connection refused")
	r := &rechecker{every: time.Hour, log: slog.New(slog.DiscardHandler), next: time.Now().Add(time.Hour)}
	a := nodeState{runID: "a", primary: true, aof: true}
	step := func(nodes map[string]nodeState, err error, refused bool) {
		t.Helper()
		r.run(func(context.Context) (map[string]nodeState, error) { return nodes, err })
		if got := r.err(time.Second, nil); (got != nil) != refused || (refused && !errors.Is(got, ErrEvictingPolicy)) {
			t.Fatalf("claims refused with %v; want refused %v", got, refused)
		}
	}
	evicting := a
	evicting.evicting = &policyError{node: "server 10.0.0.1:6379", policy: "allkeys-lru"}
	step(map[string]nodeState{"10.0.0.1:6379": evicting, "10.0.0.2:6379": {}}, unreachable, true)
	step(map[string]nodeState{"10.0.0.1:6379": a, "10.0.0.2:6379": {}}, unreachable, false)
	step(map[string]nodeState{"10.0.0.1:6379": evicting}, nil, true)
	// A cluster whose state could not be read asked no node: the verdict
	// stays.
	step(map[string]nodeState{}, errors.New("redis: cluster has no nodes"), true)
	step(map[string]nodeState{"10.0.0.1:6379": a}, nil, false)
	// A node that left the cluster takes its verdict with it.
	step(map[string]nodeState{"10.0.0.1:6379": a, "10.0.0.3:6379": evicting}, nil, true)
	step(map[string]nodeState{"10.0.0.1:6379": a}, nil, false)
}
