package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dropAppName reads the server's messages from r and leaves out every
// ParameterStatus report of application_name, as a connection pooler that
// does not pass them on would; dropped counts them.
type dropAppName struct {
	r       io.Reader
	pending []byte
	dropped *atomic.Int64
}

func (d *dropAppName) Read(p []byte) (int, error) {
	for len(d.pending) == 0 {
		// Every server message, from the first (sslmode=disable: no SSL
		// answer before it), is a type byte, a length that counts itself,
		// and the body.
		var head [5]byte
		if _, err := io.ReadFull(d.r, head[:]); err != nil {
			return 0, err
		}
		body := make([]byte, int(binary.BigEndian.Uint32(head[1:]))-4)
		if _, err := io.ReadFull(d.r, body); err != nil {
			return 0, err
		}
		if head[0] == 'S' && bytes.HasPrefix(body, []byte("application_name\x00")) {
			d.dropped.Add(1)
			continue
		}
		d.pending = append(append(d.pending, head[:]...), body...)
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

// TestBeginClaimWithoutParameterStatus runs BeginClaim's outcomes on
// connections that never see a ParameterStatus report of application_name
// (a pooler that drops them): the store then reads the setting inside the
// claim's transaction, one round trip more, and every outcome must come
// out as with the report. It fails when that read is gone or wrong (every
// claim then fails: no outcome), and it checks that reports were dropped,
// so that it does not pass with the report in hand.
func TestBeginClaimWithoutParameterStatus(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			db := newTestDB(t)
			var dropped atomic.Int64
			pool := db.pool(t, func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
				c.ConnConfig.RuntimeParams["application_name"] = "billing-api"
				c.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
					return pgproto3.NewFrontend(&dropAppName{r: r, dropped: &dropped}, w)
				}
				c.MaxConns = 4
			})
			st, err := NewStore(context.Background(), pool)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			k := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "no-report")}
			req := idemrt.ClaimRequest{RecordKey: k, Fingerprint: [32]byte{1}, FingerprintVersion: 2, Lease: 10 * time.Second, TTL: time.Hour}

			before := dropped.Load()
			tx, first, err := st.BeginClaim(ctx, req)
			if err != nil || first.State != idemrt.Acquired || first.TakenOver || first.Epoch <= 0 {
				t.Fatalf("first claim: %+v, %v", first, err)
			}
			if dropped.Load() == before {
				t.Fatal("the claim's application_name report reached the client: the test does not take the fallback read")
			}
			_, dup, err := st.BeginClaim(ctx, req)
			if err != nil || dup.State != idemrt.InProgress {
				t.Fatalf("duplicate in flight: %+v, %v; want InProgress", dup, err)
			}
			resp := &idemrt.SavedResponse{Status: 201, Header: http.Header{"Location": {"/charges/1"}}, Body: []byte(`{"id":1}`)}
			if err := tx.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: first.Epoch, Response: resp, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			_, replay, err := st.BeginClaim(ctx, req)
			if err != nil || replay.State != idemrt.Completed || replay.Epoch != first.Epoch || replay.Response == nil ||
				string(replay.Response.Body) != `{"id":1}` {
				t.Fatalf("replay: %+v, %v", replay, err)
			}

			// A takeover of a committed claim whose lease ended.
			k2 := idemrt.RecordKey{Scope: "createCharge", Key: harness.UniqueKey(t, "no-report-takeover")}
			short := idemrt.ClaimRequest{RecordKey: k2, Fingerprint: [32]byte{3}, Lease: 200 * time.Millisecond, TTL: time.Hour}
			abandoned, err := st.Claim(ctx, short)
			if err != nil || abandoned.State != idemrt.Acquired {
				t.Fatalf("claim: %+v, %v", abandoned, err)
			}
			time.Sleep(300 * time.Millisecond)
			tx2, took, err := st.BeginClaim(ctx, short)
			if err != nil || took.State != idemrt.Acquired || !took.TakenOver || took.Epoch != abandoned.Epoch+1 {
				t.Fatalf("takeover: %+v, %v; want Acquired, taken over, at epoch %d", took, err, abandoned.Epoch+1)
			}
			if err := tx2.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			// Every connection went back to the pool idle, its own name restored.
			for _, c := range pool.AcquireAllIdle(ctx) {
				var name string
				err := c.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name)
				status := c.Conn().PgConn().TxStatus()
				c.Release()
				if err != nil || name != "billing-api" || status != 'I' {
					t.Fatalf("a connection after the claims: application_name %q, %v, transaction status %c", name, err, status)
				}
			}
		})
	}
}
