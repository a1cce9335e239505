package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestCoverage proves that the whole stack main serves (access log, bearer
// check, idempotency middleware, routes) protects every annotated
// operation, without charging anyone.
func TestCoverage(t *testing.T) {
	cfg := config{dbPath: filepath.Join(t.TempDir(), "p.db")}
	log := slog.New(slog.DiscardHandler)
	be, err := openBackend(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	h, err := newServer(be, cfg, log)
	if err != nil {
		t.Fatal(err)
	}

	// requireBearer answers the /v1 probes before the middleware sees them
	// (a problem+json 401, but not idemgen's): unproven, and said so.
	err = idemsqlite.CheckCoverage(h, idemrt.CoverageOptions{})
	if err == nil || !strings.Contains(err.Error(), "createCharge") || !strings.Contains(err.Error(), "createRefund") ||
		!strings.Contains(err.Error(), "Prepare") || strings.Contains(err.Error(), "receivePaymentEvent") {
		t.Fatalf("without a token: %v; want createCharge and createRefund unproven (401 before the middleware), the webhook proven", err)
	}

	bearer := func(_ *idemrt.Policy, r *http.Request) { r.Header.Set("Authorization", "Bearer acct_coverage") }
	if err := idemsqlite.CheckCoverage(h, idemrt.CoverageOptions{Prepare: bearer}); err != nil {
		t.Fatal(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/v1/charges", nil)
	r.Header.Set("Authorization", "Bearer acct_coverage")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"data":[]`) {
		t.Errorf("the probes charged someone: %d %s", w.Code, w.Body)
	}
}
