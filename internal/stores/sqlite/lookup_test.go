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

// TestLookupPacking checks what Lookup packs into its live column against
// records of every state, through Claim: the status and fingerprint version
// of a replay, the lease of a conflict, and a record whose status does not
// fit its bits (never written by the store) refused with an error rather
// than replayed with another status.
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
	for _, status := range []int{100, 201, 409, 599, 999, 1023} {
		r := req("status-"+http.StatusText(status)+string(rune('a'+status%26)), 1+status%15)
		complete(r, &idemrt.SavedResponse{Status: status, Header: http.Header{"X-A": {"1", "2"}}, Body: []byte("body")})
		res, err := st.Claim(ctx, r)
		if err != nil || res.State != idemrt.Completed || res.Response == nil {
			t.Fatalf("status %d: %+v, %v", status, res, err)
		}
		if res.Response.Status != status || res.FingerprintVersion != r.FingerprintVersion || res.Fingerprint != r.Fingerprint ||
			strings.Join(res.Response.Header["X-A"], ",") != "1,2" || string(res.Response.Body) != "body" {
			t.Errorf("status %d, version %d: replayed %+v, response %+v", status, r.FingerprintVersion, res, res.Response)
		}
	}
	tomb := req("tombstone", 15)
	complete(tomb, nil)
	if res, err := st.Claim(ctx, tomb); err != nil || !res.Tombstone || res.FingerprintVersion != 15 {
		t.Errorf("tombstone: %+v, %v", res, err)
	}
	held := req("held", 2)
	if res, err := st.Claim(ctx, held); err != nil || res.State != idemrt.Acquired {
		t.Fatal(res, err)
	}
	res, err := st.Claim(ctx, held)
	if err != nil || res.State != idemrt.InProgress || res.FingerprintVersion != 2 || res.LeaseRemaining <= 50*time.Second || res.LeaseRemaining > time.Minute {
		t.Errorf("in progress: %+v, %v", res, err)
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
