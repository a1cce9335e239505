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

// TestLookupStates checks what Claim reads back through Lookup from
// records of every state: the status, headers, body and fingerprint
// version of a replay, a tombstone, and the lease of a conflict.
func TestLookupStates(t *testing.T) {
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

}
