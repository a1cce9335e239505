package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestSimultaneousAssignment: under MariaDB's SIMULTANEOUS_ASSIGNMENT every
// assignment of the claim's ON DUPLICATE KEY UPDATE sees the old row, so a
// takeover would change only claim_token and report 2 rows with no new
// epoch. NewStore refuses such a session with an error naming the mode;
// a store that runs under it anyway (the mode set after NewStore) gets an
// error from Claim, never Acquired, and the record is left claimable.
func TestSimultaneousAssignment(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	simultaneous := db.open(t, func(c *mysql.Config) {
		c.Params = map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,SIMULTANEOUS_ASSIGNMENT'"}
	})
	var mode string
	if err := simultaneous.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mode, "SIMULTANEOUS_ASSIGNMENT") {
		t.Skipf("the server does not keep SIMULTANEOUS_ASSIGNMENT (sql_mode %q): not MariaDB >= 10.3.5", mode)
	}
	if _, err := NewStore(ctx, simultaneous); err == nil || !strings.Contains(err.Error(), "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("NewStore under SIMULTANEOUS_ASSIGNMENT: %v, want an error naming it", err)
	}

	good := db.store(t)
	q, err := sqlcPrepare(ctx, simultaneous)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	bad := &Store{db: simultaneous, q: q} // what NewStore would have refused
	k := idemrt.RecordKey{Scope: "simultaneous", Key: harness.UniqueKey(t, "simultaneous")}
	req := idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour}
	res, err := good.Claim(ctx, req)
	if err != nil || res.State != idemrt.Acquired || res.Epoch <= 0 || res.TakenOver {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if err := good.Release(ctx, k, res.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	for i := range 2 { // a second attempt must not see the first as a claim either
		if got, err := bad.Claim(ctx, req); err == nil || got.State == idemrt.Acquired {
			t.Fatalf("claim %d of a released record under SIMULTANEOUS_ASSIGNMENT: %+v, %v; want an error", i+1, got, err)
		}
	}
	got, err := good.Claim(ctx, req)
	if err != nil || got.State != idemrt.Acquired || got.Epoch != res.Epoch+1 || got.TakenOver {
		t.Fatalf("claim after the refused ones: %+v, %v; want acquired at epoch %d (the release's epoch continued)", got, err, res.Epoch+1)
	}
	if err := checkSQLMode("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"); err != nil {
		t.Errorf("default sql_mode refused: %v", err)
	}
}
