package main

import (
	"context"
	"strings"
	"testing"
)

// Bad command lines get exit code 2 and a message naming the problem,
// before anything is opened.
func TestUsage(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{nil, "", "usage: ledger relay|consume"},
		{[]string{"publish"}, "", `unknown command "publish"`},
		{[]string{"relay"}, "", "-dsn (the payments database) is required"},
		{[]string{"consume"}, "", "-dsn (the ledger's PostgreSQL database) is required"},
		{[]string{"consume", "-dsn", "postgres://x", "-broker", "kafka"}, "", `-broker "kafka": want nats or amqp`},
		{[]string{"relay", "-dsn", "postgres://x", "-subject-prefix", "payments"}, "", "want tokens ending with a dot"},
		{[]string{"relay", "-dsn", "postgres://x", "-subject-prefix", "a.>."}, "", "no wildcards"},
		{[]string{"relay", "-dsn", "postgres://x", "-batch", "0"}, "", "must be positive"},
		{[]string{"relay", "-dsn", "postgres://x", "-crash-at", "after-commit"}, "", `unknown point (known: after-publish)`},
		{[]string{"consume", "-dsn", "postgres://x"}, "after-publish:2", `unknown point (known: after-commit)`},
		{[]string{"consume", "-dsn", "postgres://x", "extra"}, "", `unexpected argument "extra"`},
		{[]string{"consume", "-dsn", "postgres://x", "-max-conns", "0"}, "", "-max-conns must be 1 to 1000"},
		{[]string{"consume", "-dsn", "postgres://x", "-ack-wait", "0s"}, "", "-ack-wait positive"},
	} {
		env["LEDGER_CRASH_AT"] = c.env
		var out strings.Builder
		code := run(context.Background(), c.args, getenv, &out)
		if code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("ledger %v (LEDGER_CRASH_AT=%q): exit %d, output %q; want 2 and %q", c.args, c.env, code, out.String(), c.want)
		}
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"relay", "-h"}, getenv, &out); code != 0 || !strings.Contains(out.String(), "-lease") {
		t.Errorf("ledger relay -h: exit %d, output %q", code, out.String())
	}
}
