package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
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

	// Each charge has its event in the outbox, once, whether its client
	// heard back or not; so has the refund.
	var c2 Charge
	if err := json.Unmarshal(r.body, &c2); err != nil {
		t.Fatal(err)
	}
	ref := q.mustCall("POST", "/v1/refunds", acct, "", `{"charge":"`+c2.ID+`","amount":500}`)
	expect(t, "refund", ref, 201)
	var re Refund
	if err := json.Unmarshal(ref.body, &re); err != nil {
		t.Fatal(err)
	}
	charges := q.charges(acct)
	q.stop()
	evs := outbox(t, db)
	if len(evs) != 4 {
		t.Fatalf("%d outbox events, want 3 charges and 1 refund: %v", len(evs), evs)
	}
	byID := map[string]outboxRow{}
	for _, ev := range evs {
		byID[ev.id] = ev
	}
	for _, c := range charges {
		if ev, ok := byID["charge.created:"+c.ID]; !ok || ev.topic != "charge.created" || ev.key != c.ID {
			t.Errorf("charge %s: outbox event %+v", c.ID, ev)
		}
	}
	ev := byID["refund.created:"+re.ID]
	var payload struct {
		Account, Currency, Charge string
		Amount                    int64
	}
	if err := json.Unmarshal([]byte(ev.payload), &payload); err != nil ||
		ev.topic != "refund.created" || ev.key != c2.ID || payload.Account != acct || payload.Currency != "usd" || payload.Charge != c2.ID || payload.Amount != 500 {
		t.Errorf("refund %s: outbox event %+v (%v)", re.ID, ev, err)
	}
}

type outboxRow struct{ id, topic, key, payload string }

// outbox reads the SQLite database's outbox, in order.
func outbox(t *testing.T, path string) []outboxRow {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, topic, event_key, payload FROM idempotency_keys_outbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var payload []byte
		if err := rows.Scan(&r.id, &r.topic, &r.key, &payload); err != nil {
			t.Fatal(err)
		}
		r.payload = string(payload)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCrashAtFlag(t *testing.T) {
	var out strings.Builder
	if _, err := parseFlags([]string{"-crash-at", "before-commit"}, func(string) string { return "" }, &out); err == nil ||
		!strings.Contains(err.Error(), "unknown point") {
		t.Errorf("-crash-at before-commit: err = %v, want unknown point", err)
	}
}
