package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestCoverage proves that the whole stack main serves (access log, bearer
// check, idempotency middleware, routes) protects every annotated
// operation, without charging anyone.
func TestCoverage(t *testing.T) {
	srv, _, _ := newTestApp(t)
	h := srv.Config.Handler

	// requireBearer answers the /v1 probes, and requireSignature the
	// webhook's, before the middleware sees them (problem+json 401s, but
	// not idemgen's): unproven, and said so.
	err := idemsqlite.CheckCoverage(h, idemrt.CoverageOptions{})
	for _, op := range []string{"createCharge", "createRefund", "receivePaymentEvent"} {
		if err == nil || !strings.Contains(err.Error(), "operation "+op+",") || !strings.Contains(err.Error(), "Prepare") {
			t.Fatalf("without credentials: %v; want %s unproven (401 before the middleware)", err, op)
		}
	}

	// With a token and a signed webhook body, every probe reaches the
	// middleware and is refused there.
	secret := []byte(demoWebhookSecret)
	prepare := func(_ *idemrt.Policy, r *http.Request) {
		r.Header.Set("Authorization", "Bearer acct_coverage")
		if r.URL.Path == webhookPath && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.Header.Set(signatureHeader, signHeader(secret, time.Now(), body))
		}
	}
	if err := idemsqlite.CheckCoverage(h, idemrt.CoverageOptions{Prepare: prepare}); err != nil {
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
