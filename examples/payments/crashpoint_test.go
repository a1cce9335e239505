package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// -crash-at after-commit:2 kills the server (SIGKILL, by itself) after the
// second charge commits and before its response is written: the client gets
// no answer, the charge exists, and the client's retry on the restarted
// server replays it instead of charging again.
func TestCrashAfterCommit(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "payments.db")
	p := start(t, "-db", db, "-crash-at", "after-commit:2")
	acct := "acct_" + randHex(4)
	expect(t, "first charge", p.mustCall("POST", "/v1/charges", acct, "key-1", chargeBody), 201)
	if r, err := p.call("POST", "/v1/charges", acct, "key-2", chargeBody); err == nil {
		t.Fatalf("second charge answered %d, want no answer (the process killed itself)", r.status)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not exit after the crash point")
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the server exited with %v, want SIGKILL", p.cmd.ProcessState)
	}
	if !strings.Contains(p.log(), "crashpoint: SIGKILL at after-commit (passage 2)") {
		t.Fatalf("no crash line in the log:\n%s", p.log())
	}

	q := start(t, "-db", db)
	r := q.mustCall("POST", "/v1/charges", acct, "key-2", chargeBody)
	expect(t, "retry after the crash", r, 201)
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Error("the retry ran the charge again: it was committed before the crash")
	}
	if got := q.charges(acct); len(got) != 2 {
		t.Fatalf("%d charges, want 2", len(got))
	}
	again := q.mustCall("POST", "/v1/charges", acct, "key-3", chargeBody)
	expect(t, "a third charge on the restarted server (no crash point)", again, 201)
	if bytes.Equal(again.body, r.body) {
		t.Error("the third charge replayed the second")
	}
}

func TestCrashAtFlag(t *testing.T) {
	var out strings.Builder
	if _, err := parseFlags([]string{"-crash-at", "before-commit"}, func(string) string { return "" }, &out); err == nil ||
		!strings.Contains(err.Error(), "unknown point") {
		t.Errorf("-crash-at before-commit: err = %v, want unknown point", err)
	}
}
