package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/stores/redisstore"
)

// TestRestrictedChecks: New reads ROLE and INFO to check the server. Where
// an ACL denies either to the store's user (as some managed services do),
// New refuses with an error that names the command it needs and the ACL
// rule that grants it, rather than the bare NOPERM reply; it never starts
// unchecked. With both granted (and nothing else), New succeeds.
func TestRestrictedChecks(t *testing.T) {
	ctx := context.Background()
	srv := harness.StartRedis(t,
		"--user", "noinfo", "on", ">pw", "~*", "+@all", "-info",
		"--user", "norole", "on", ">pw", "~*", "+@all", "-role",
		"--user", "minimal", "on", ">pw", "~*", "+@all", "-@dangerous", "+info", "+role")
	for _, tc := range []struct{ user, command string }{{"noinfo", "INFO"}, {"norole", "ROLE"}} {
		_, err := redisstore.New(ctx, dial(t, "redis://"+tc.user+":pw@"+srv.Addr()), redisstore.Options{Logger: testLogger(t)})
		t.Logf("user %s: %v", tc.user, err)
		if err == nil {
			t.Fatalf("New as a user denied %s: no error", tc.command)
		}
		for _, want := range []string{srv.Addr(), "NOPERM", "needs " + tc.command, "+" + strings.ToLower(tc.command)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("New as a user denied %s: %q does not say %q", tc.command, err, want)
			}
		}
	}
	if _, err := redisstore.New(ctx, dial(t, "redis://minimal:pw@"+srv.Addr()), redisstore.Options{Logger: testLogger(t)}); err != nil {
		t.Fatalf("New as a user granted ROLE and INFO: %v", err)
	}
}
