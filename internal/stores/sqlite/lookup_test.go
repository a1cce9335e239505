package sqlite

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestLookupPacking checks that a record whose status does not fit
// Lookup's packed bits (never written by the store) is refused with an
// error rather than replayed with another status. What Lookup reads back
// from records the store writes is the conformance suite's
// ReplayReadsBackEveryField.
func TestLookupPacking(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	conn := db.open(t)
	st, err := NewStore(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	req := func(key string, version int) idemrt.ClaimRequest {
		r := idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "s", Key: key}, Lease: time.Minute, TTL: time.Hour, FingerprintVersion: version}
		r.PrincipalHash[0], r.Fingerprint[31] = 7, 9
		return r
	}
	complete := func(r idemrt.ClaimRequest, resp *idemrt.SavedResponse) {
		t.Helper()
		res, err := st.Claim(ctx, r)
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim %s: %+v, %v", r.Key, res, err)
		}
		if err := st.Complete(ctx, idemrt.Completion{RecordKey: r.RecordKey, Epoch: res.Epoch, Response: resp, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	odd := req("odd-status", 1)
	complete(odd, &idemrt.SavedResponse{Status: 201, Header: http.Header{}, Body: nil})
	if _, err := conn.ExecContext(ctx, "UPDATE idempotency_keys SET status = 1024 WHERE idem_key = 'odd-status'"); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Claim(ctx, odd); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("status 1024 in the table: %+v, %v; want an out-of-range error", res, err)
	}
}

// TestUTF16Refused: NewStore refuses a database whose encoding is not
// UTF-8, on which Lookup's concatenation would lose bytes.
func TestUTF16Refused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "utf16.db")
	conn, err := sql.Open("sqlite", "file:"+path+"?_pragma=encoding('UTF-16le')&_pragma=journal_mode(WAL)&_pragma=busy_timeout(1000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if err := ApplySchema(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var enc string
	if err := conn.QueryRowContext(ctx, "PRAGMA encoding").Scan(&enc); err != nil || enc != "UTF-16le" {
		t.Fatalf("encoding %q, %v: the test did not make a UTF-16 database", enc, err)
	}
	if _, err := NewStore(ctx, conn); err == nil || !strings.Contains(err.Error(), "UTF-16le") {
		t.Fatalf("NewStore on a UTF-16 database: %v; want a refusal naming the encoding", err)
	}
}
