package mysql

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestLookupPacking checks what Lookup packs into its live column (see
// storekit.Packed) against records of every state, through Claim: the
// status and fingerprint version of a replay, the lease of a conflict, and
// a record whose state, status or fingerprint version does not fit (never
// written by the store) refused with an error rather than replayed with
// another status or claimed.
func TestLookupPacking(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	conn := db.open(t, nil)
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
		r := req(fmt.Sprintf("status-%d", status), 1+status%15)
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

	for i, set := range []string{"status = 1024", "status = -1", "fingerprint_version = 16", "state = 0"} {
		odd := req(fmt.Sprintf("odd-%d", i), 1)
		complete(odd, &idemrt.SavedResponse{Status: 201, Header: http.Header{}, Body: nil})
		if _, err := conn.ExecContext(ctx, "UPDATE idempotency_keys SET "+set+" WHERE idem_key = ?", odd.Key); err != nil {
			t.Fatal(err)
		}
		if res, err := st.Claim(ctx, odd); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s in the table: %+v, %v; want an out-of-range error", set, res, err)
		}
	}
}
