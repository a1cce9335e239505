package multifile

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update

// The annotations, key fields and response headers below are written in
// paths/*.yaml, components/*.yaml and schemas/*.yaml, not in openapi.yaml.

func server(t *testing.T) (http.Handler, *behave.Counter, *behave.Counter, *behave.Counter) {
	t.Helper()
	orders := &behave.Counter{Status: http.StatusCreated, Header: map[string]string{"Order-Version": "1"}}
	replace := &behave.Counter{}
	refunds := &behave.Counter{Status: http.StatusCreated}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", orders)
	mux.Handle("PUT /orders/{orderId}", replace)
	mux.Handle("POST /refunds", refunds)
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	return mw(mux), orders, replace, refunds
}

func TestKeyFieldsFromAReferencedSchema(t *testing.T) {
	h, orders, _, _ := server(t)
	behave.Want(t, "first", behave.Do(t, h, "POST", "/orders", nil, `{"customer":"c1","cart":{"id":"k1","items":["a"]}}`), http.StatusCreated, false)
	again := behave.Do(t, h, "POST", "/orders", nil, `{"cart":{"items":["a"],"id":"k1"},"customer":"c1"}`)
	behave.Want(t, "same order, keys reordered", again, http.StatusCreated, true)
	if got := again.Header.Get("Order-Version"); got != "1" {
		t.Errorf("Order-Version (declared in components/responses.yaml) replayed as %q, want 1", got)
	}
	behave.WantProblem(t, "same customer and cart id, other items", behave.Do(t, h, "POST", "/orders", nil, `{"customer":"c1","cart":{"id":"k1","items":["b"]}}`), http.StatusUnprocessableEntity)
	behave.Want(t, "other cart", behave.Do(t, h, "POST", "/orders", nil, `{"customer":"c1","cart":{"id":"k2"}}`), http.StatusCreated, false)
	if n := orders.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestOptionalHeaderKeyFromAReferencedPathItem(t *testing.T) {
	h, _, replace, _ := server(t)
	k := map[string]string{"Idempotency-Key": "r-1"}
	behave.Want(t, "first", behave.Do(t, h, "PUT", "/orders/o1", k, `{"customer":"c1","cart":{"id":"k1"}}`), http.StatusOK, false)
	behave.Want(t, "retry", behave.Do(t, h, "PUT", "/orders/o1", k, `{"customer":"c1","cart":{"id":"k1"}}`), http.StatusOK, true)
	behave.Want(t, "no key: required false lets it through", behave.Do(t, h, "PUT", "/orders/o1", nil, `{}`), http.StatusOK, false)
	if n := replace.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestPathItemFromAFragmentOfAnotherFile(t *testing.T) {
	h, _, _, refunds := server(t)
	k := map[string]string{"Idempotency-Key": "f-1"}
	behave.Want(t, "first", behave.Do(t, h, "POST", "/refunds", k, `{"order":"o1","amount":5}`), http.StatusCreated, false)
	behave.Want(t, "retry", behave.Do(t, h, "POST", "/refunds", k, `{"order":"o1","amount":5}`), http.StatusCreated, true)
	behave.WantProblem(t, "no key", behave.Do(t, h, "POST", "/refunds", nil, `{}`), http.StatusBadRequest)
	if n := refunds.N.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
