package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestQueryCountsInFingerprint: the query is part of the request, so a key
// reused with another query (a dry run, then the real run) is a mismatch,
// not a replay of the other run; the order of different names does not
// matter (that of one name's values does: TestRepeatedValuesKeepTheirOrder),
// and a query-sourced key is not part of its own fingerprint.
func TestQueryCountsInFingerprint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *idemrt.Policy
		first  string
		then   []struct {
			target string
			status int
			replay bool
		}
	}{
		{
			name:   "header key",
			policy: policy(),
			first:  "/orders/1?dry_run=true&notify=no",
			then: []struct {
				target string
				status int
				replay bool
			}{
				{"/orders/1?notify=no&dry_run=true", http.StatusCreated, true},
				{"/orders/1", http.StatusUnprocessableEntity, false},
				{"/orders/1?dry_run=false&notify=no", http.StatusUnprocessableEntity, false},
			},
		},
		{
			name: "query key",
			policy: policy(func(p *idemrt.Policy) {
				p.Key, p.KeyName = idemrt.KeyFromQuery, "key"
			}),
			first: "/orders/1?key=k1&expand=items",
			then: []struct {
				target string
				status int
				replay bool
			}{
				{"/orders/1?expand=items&key=k1", http.StatusCreated, true},
				{"/orders/1?key=k1", http.StatusUnprocessableEntity, false},
				{"/orders/1?key=k1&expand=all", http.StatusUnprocessableEntity, false},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &counting{}
			srv, err := idemrt.Wrap(idemrt.Options{Store: idemrt.NewMemoryStore()}, tc.policy, h)
			if err != nil {
				t.Fatal(err)
			}
			send := func(target string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"n":1}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "k1")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				return w
			}
			if w := send(tc.first); w.Code != http.StatusCreated {
				t.Fatalf("first %s: %d %s", tc.first, w.Code, w.Body)
			}
			for _, step := range tc.then {
				w := send(step.target)
				if w.Code != step.status || (w.Header().Get("Idempotent-Replayed") == "true") != step.replay {
					t.Errorf("%s: %d replayed=%q, want %d replayed=%v", step.target, w.Code, w.Header().Get("Idempotent-Replayed"), step.status, step.replay)
				}
			}
			if n := h.calls.Load(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}
