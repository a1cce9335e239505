package redisstore

import (
	"slices"
	"strings"
	"testing"
)

// TestCheckVersion: New refuses a server older than Redis 7 (the scripts'
// flags need it) or one whose INFO reports no version. The servers the
// other tests start are 7.x, so this is where an older one is seen.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"7.0.15": true, "7.2.4": true, "8.0.1": true, "6.2.14": false, "5.0.7": false, "": false, "x.y": false} {
		err := checkVersion("h:1", v)
		if (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", v, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "Redis 7.0 or later") {
			t.Errorf("checkVersion(%q) = %v: the message does not say what is needed", v, err)
		}
	}
}

// TestClusterReplicas: the replicas New checks are the CLUSTER NODES lines
// flagged slave that are reachable; IPv6 addresses get brackets.
func TestClusterReplicas(t *testing.T) {
	nodes := `a1 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5460
b2 10.0.0.2:6379@16379,redis-b slave a1 0 1 1 connected
c3 10.0.0.3:6379@16379 slave,fail a1 0 1 1 connected
d4 10.0.0.4:6379@16379 slave,fail? a1 0 1 1 connected
e5 :0@0 slave,noaddr a1 0 1 1 disconnected
f6 ::1:7000@17000 slave a1 0 1 1 connected
g7 10.0.0.7:6379@16379 master,handshake - 0 0 0 connected
`
	got := clusterReplicas(nodes)
	want := []string{"10.0.0.2:6379", "[::1]:7000"}
	if !slices.Equal(got, want) {
		t.Fatalf("clusterReplicas: %q, want %q", got, want)
	}
}
