package routers_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"github.com/idemgen/idemgen/golden/headerkey"
	"github.com/idemgen/idemgen/golden/internal/behave"
	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

// The generated Middleware has the shape routers take
// (func(http.Handler) http.Handler): these tests mount golden/headerkey's
// with chi's and gorilla/mux's own Use, with the routes declared in each
// router's syntax, and check that it still tells the operations apart by
// path template.

func apiKey(r *http.Request) (string, error) {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k, nil
	}
	return "", errors.New("no API key")
}

func middleware(t *testing.T) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := headerkey.Middleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

func TestChiRouter(t *testing.T) {
	charges := &behave.Counter{Status: http.StatusCreated}
	refunds := &behave.Counter{}
	r := chi.NewRouter()
	r.Use(middleware(t))
	// A sub-router mounted under the spec's base path, as chi users do.
	r.Route("/v1", func(r chi.Router) {
		r.Method(http.MethodPost, "/charges", charges)
		r.Method(http.MethodPost, "/charges/{chargeId}/refunds", refunds)
	})
	exerciseRouter(t, r, charges, refunds)
}

func TestGorillaMuxRouter(t *testing.T) {
	charges := &behave.Counter{Status: http.StatusCreated}
	refunds := &behave.Counter{}
	r := mux.NewRouter()
	r.Use(mux.MiddlewareFunc(middleware(t)))
	v1 := r.PathPrefix("/v1").Subrouter()
	v1.Handle("/charges", charges).Methods(http.MethodPost)
	v1.Handle("/charges/{chargeId}/refunds", refunds).Methods(http.MethodPost)
	exerciseRouter(t, r, charges, refunds)
}

func exerciseRouter(t *testing.T, h http.Handler, charges, refunds *behave.Counter) {
	t.Helper()
	alice := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "k-1"}
	first := behave.Do(t, h, "POST", "/v1/charges", alice, `{"amount":100}`)
	behave.Want(t, "charge", first, http.StatusCreated, false)
	again := behave.Do(t, h, "POST", "/v1/charges", alice, `{"amount":100}`)
	behave.Want(t, "charge retried", again, http.StatusCreated, true)
	if again.Body != first.Body {
		t.Errorf("replayed body %q, want %q", again.Body, first.Body)
	}
	behave.WantProblem(t, "charge with another body", behave.Do(t, h, "POST", "/v1/charges", alice, `{"amount":200}`), http.StatusUnprocessableEntity)
	behave.WantProblem(t, "charge without a key", behave.Do(t, h, "POST", "/v1/charges", map[string]string{"X-API-Key": "alice"}, `{"amount":100}`), http.StatusBadRequest)

	key := map[string]string{"X-Request-Key": "r-1"}
	behave.Want(t, "refund ch_1", behave.Do(t, h, "POST", "/v1/charges/ch_1/refunds", key, `{}`), http.StatusOK, false)
	behave.Want(t, "refund ch_1 retried", behave.Do(t, h, "POST", "/v1/charges/ch_1/refunds", key, `{}`), http.StatusOK, true)
	behave.WantProblem(t, "same key, other path parameter", behave.Do(t, h, "POST", "/v1/charges/ch_2/refunds", key, `{}`), http.StatusUnprocessableEntity)

	if n := charges.N.Load(); n != 1 {
		t.Errorf("charge handler ran %d times, want 1", n)
	}
	if n := refunds.N.Load(); n != 1 {
		t.Errorf("refund handler ran %d times, want 1", n)
	}
}
