package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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

// TestFailedOver: the re-check tells a failover (another server, which
// has the previous primary's data) from a restart or a promotion that
// lost data, from INFO's uptime and replication fields.
func TestFailedOver(t *testing.T) {
	now := time.Now()
	const old, other = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	prev := seenNode{nodeState{runID: "a", primary: true, replID: old, offset: 5000, uptime: time.Hour}, now.Add(-5 * time.Second)}
	promoted := nodeState{runID: "b", primary: true, replID: "3333333333333333333333333333333333333333", replID2: old, secondOffset: 5001, uptime: time.Hour}
	for _, tc := range []struct {
		name string
		n    func(nodeState) nodeState
		want bool
	}{
		{"a replica promoted with the primary's data", func(n nodeState) nodeState { return n }, true},
		{"a replica promoted ahead of the last reading", func(n nodeState) nodeState { n.secondOffset = 9000; return n }, true},
		{"restarted from an RDB snapshot (up 2s)", func(n nodeState) nodeState { n.uptime = 2 * time.Second; return n }, false},
		{"restarted from a snapshot as the re-check read it (up 5s)", func(n nodeState) nodeState { n.uptime = 5 * time.Second; return n }, false},
		{"a replica promoted behind the last reading", func(n nodeState) nodeState { n.secondOffset = 4000; return n }, false},
		{"a replica promoted before it synchronised", func(n nodeState) nodeState { n.replID2 = other; return n }, false},
		{"prev was its replica", func(n nodeState) nodeState { n.replID, n.replID2, n.offset = old, other, 5000; return n }, true},
		{"prev was its replica, ahead of it", func(n nodeState) nodeState { n.replID, n.replID2, n.offset = old, other, 4999; return n }, false},
	} {
		if got := failedOver(prev, tc.n(promoted), now); got != tc.want {
			t.Errorf("%s: failedOver %v, want %v", tc.name, got, tc.want)
		}
	}
	if failedOver(seenNode{nodeState{runID: "a", primary: true}, prev.at}, promoted, now) {
		t.Error("a previous reading without a replication ID: failedOver, want not")
	}
}

// TestKeySlot: the marker of a record is in the record's hash slot
// (Redis Cluster's CRC-16 of the hash tag; reference values from CLUSTER
// KEYSLOT), and every slot has a tag.
func TestKeySlot(t *testing.T) {
	for key, slot := range map[string]int{"foo": 12182, "123456789": 12739, "{user1000}.following": 3443, "idem:{abc}": 7638, "a{}b": 13694} {
		if got := keySlot(key); got != slot {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, slot)
		}
	}
	for slot, tag := range slotTags() {
		if keySlot("x{"+tag+"}") != slot {
			t.Fatalf("slot %d: tag %q hashes to %d", slot, tag, keySlot(tag))
		}
	}
}

// TestResumeLogged: a claim whose script ended a refusal window (it set
// its marker back to live: the server's clock says the window is over)
// logs that claims resume, even when this store's own estimate of the
// window's end, taken when the refused reply arrived, is a round trip
// later (a restart's test did not see "claims resume" now and then).
func TestResumeLogged(t *testing.T) {
	var buf strings.Builder
	r := &rechecker{log: slog.New(slog.NewTextHandler(&buf, nil))}
	r.lost(time.Hour, func(log *slog.Logger) { log.Error("lost") })
	r.resumed()
	r.resumed()
	if n := strings.Count(buf.String(), "claims resume"); n != 1 {
		t.Errorf("the end of the refusal was logged %d times, want once:\n%s", n, buf.String())
	}
}
