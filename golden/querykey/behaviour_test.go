package querykey

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update

func server(t *testing.T) (http.Handler, *behave.Counter) {
	t.Helper()
	c := &behave.Counter{Status: http.StatusCreated}
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	return mw(c), c
}

func TestQueryKeyUnderBothBasePaths(t *testing.T) {
	h, c := server(t)
	first := behave.Do(t, h, "POST", "/api/orders?request_id=q1", nil, `{"item":"tea","client_timestamp":"10:00"}`)
	behave.Want(t, "first", first, http.StatusCreated, false)
	// client_timestamp is excluded from the fingerprint.
	again := behave.Do(t, h, "POST", "/api/orders?request_id=q1", nil, `{"item":"tea","client_timestamp":"10:05"}`)
	behave.Want(t, "retry with another timestamp", again, http.StatusCreated, true)
	behave.WantProblem(t, "other item", behave.Do(t, h, "POST", "/api/orders?request_id=q1", nil, `{"item":"coffee"}`), http.StatusUnprocessableEntity)
	behave.WantProblem(t, "no key", behave.Do(t, h, "POST", "/api/orders", nil, `{"item":"tea"}`), http.StatusBadRequest)
	behave.WantProblem(t, "key in a header is not the key", behave.Do(t, h, "POST", "/api/orders", map[string]string{"Idempotency-Key": "q1"}, `{}`), http.StatusBadRequest)
	// The root server serves the same operation.
	behave.Want(t, "root server", behave.Do(t, h, "POST", "/orders?request_id=q2", nil, `{"item":"tea"}`), http.StatusCreated, false)
	if n := c.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestQueryKeyInProgress(t *testing.T) {
	h, c := server(t)
	r := behave.InProgress(t, h, c, "POST", "/orders?request_id=busy", nil, `{"item":"tea"}`, func() {
		behave.WantProblem(t, "duplicate in progress", behave.Do(t, h, "POST", "/orders?request_id=busy", nil, `{"item":"tea"}`), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
}

func TestPathParametersAndRequestLimit(t *testing.T) {
	h, _ := server(t)
	behave.Want(t, "patch", behave.Do(t, h, "PATCH", "/orders/o1/items/7?key=p1", nil, `{"qty":2}`), http.StatusCreated, false)
	behave.Want(t, "patch again", behave.Do(t, h, "PATCH", "/orders/o1/items/7?key=p1", nil, `{"qty":2}`), http.StatusCreated, true)
	behave.WantProblem(t, "same key, other item", behave.Do(t, h, "PATCH", "/orders/o1/items/8?key=p1", nil, `{"qty":2}`), http.StatusUnprocessableEntity)
	big := `{"pad":"` + string(make([]byte, 0)) + repeat("x", 70<<10) + `"}`
	behave.WantProblem(t, "body over max-request-bytes (64KiB)", behave.Do(t, h, "PATCH", "/orders/o1/items/7?key=p2", nil, big), http.StatusRequestEntityTooLarge)
	if OrdersCreatePolicy.Scope != "orders" {
		t.Errorf("scope %q, want orders", OrdersCreatePolicy.Scope)
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, n*len(s))
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
