package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/examples/openapi-servers/internal/idem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var servers = []string{serverOapiCodegen, serverOgen}

func start(t *testing.T, kind string, naive bool) *app {
	t.Helper()
	a, err := newApp(kind, idemrt.NewMemoryStore(), naive)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Wired naively (the generated router at the root, the policies under the
// servers' /v1), nothing is protected: CheckCoverage names both
// operations, and a retry really runs twice.
func TestNaiveWiringIsReported(t *testing.T) {
	for _, kind := range servers {
		t.Run(kind, func(t *testing.T) {
			a := start(t, kind, true)
			err := idem.CheckCoverage(a, idemrt.CoverageOptions{BasePaths: a.basePaths})
			if err == nil {
				t.Fatal("CheckCoverage passed a router that serves the paths without /v1")
			}
			var ce *idemrt.CoverageError
			if !errors.As(err, &ce) {
				t.Fatalf("CheckCoverage: %v, want a *CoverageError", err)
			}
			for _, op := range []string{"createOrder", "refundOrder"} {
				if !strings.Contains(err.Error(), "operation "+op+",") {
					t.Errorf("CheckCoverage does not report %s:\n%v", op, err)
				}
			}
			t.Logf("CheckCoverage: %v", err)

			url := contracttest.Serve(t, a)
			for range 2 {
				if res := contracttest.Post(t, url+"/orders", "k1", `{"item":"book","amount":1200}`); res.Status != http.StatusCreated {
					t.Fatalf("POST /orders: %d %s", res.Status, res.Body)
				}
			}
			if n := a.shop.creates.Load(); n != 2 {
				t.Errorf("createOrder ran %d times; the naive wiring should have run the retry (that is the bug it shows)", n)
			}
		})
	}
}

// Wired right, every operation is proven protected, and the contract holds
// over real HTTP.
func TestServers(t *testing.T) {
	for _, kind := range servers {
		t.Run(kind, func(t *testing.T) {
			a := start(t, kind, false)
			if err := idem.CheckCoverage(a, idemrt.CoverageOptions{BasePaths: a.basePaths}); err != nil {
				t.Fatal(err)
			}
			url := contracttest.Serve(t, a) + a.prefix

			const body = `{"item":"book","amount":1200}`
			first := contracttest.Post(t, url+"/orders", "k1", body)
			if first.Status != http.StatusCreated {
				t.Fatalf("POST /orders: %d %s", first.Status, first.Body)
			}
			contracttest.Replayed(t, first, contracttest.Post(t, url+"/orders", "k1", body))
			contracttest.Problem(t, contracttest.Post(t, url+"/orders", "k1", `{"item":"book","amount":9900}`),
				http.StatusUnprocessableEntity, idemrt.ProblemFingerprintMismatch)
			contracttest.Problem(t, contracttest.Post(t, url+"/orders", "", body), http.StatusBadRequest, idemrt.ProblemKeyMissing)
			if n := a.shop.creates.Load(); n != 1 {
				t.Errorf("createOrder ran %d times, want 1", n)
			}

			// An operation with a path parameter.
			var o struct{ ID string }
			if err := json.Unmarshal([]byte(first.Body), &o); err != nil || o.ID == "" {
				t.Fatalf("order %s: %v", first.Body, err)
			}
			refund := contracttest.Post(t, url+"/orders/"+o.ID+"/refunds", "r1", `{"amount":200}`)
			if refund.Status != http.StatusCreated || !strings.Contains(refund.Body, `"refunded":200`) {
				t.Fatalf("refund: %d %s", refund.Status, refund.Body)
			}
			contracttest.Replayed(t, refund, contracttest.Post(t, url+"/orders/"+o.ID+"/refunds", "r1", `{"amount":200}`))
			if n := a.shop.refunds.Load(); n != 1 {
				t.Errorf("refundOrder ran %d times, want 1", n)
			}

			// Concurrent duplicates: one execution; the others get its
			// response replayed or 409 while it runs.
			const n = 20
			res := make([]contracttest.Response, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { res[i] = contracttest.Post(t, url+"/orders", "k2", `{"item":"pen","amount":300}`) })
			}
			wg.Wait()
			if got := a.shop.creates.Load(); got != 2 {
				t.Errorf("createOrder ran %d times after %d concurrent duplicates, want 2 (1 before)", got, n)
			}
			var created string
			for _, r := range res {
				switch r.Status {
				case http.StatusCreated:
					if created == "" {
						created = r.Body
					} else if r.Body != created {
						t.Errorf("two different 201 bodies for one key: %s and %s", created, r.Body)
					}
				case http.StatusConflict:
					contracttest.Problem(t, r, http.StatusConflict, idemrt.ProblemInProgress)
				default:
					t.Errorf("duplicate got %d %s", r.Status, r.Body)
				}
			}
		})
	}
}
