package headerkey

import (
	"errors"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update // every test package registers -update

func apiKey(r *http.Request) (string, error) {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k, nil
	}
	return "", errors.New("no API key")
}

// server mounts the handlers on a ServeMux under the spec's /v1 base path
// and wraps the mux with the generated Middleware.
func server(t *testing.T) (http.Handler, *behave.Counter, *behave.Counter, *behave.Counter) {
	t.Helper()
	charges := &behave.Counter{Status: http.StatusCreated, Header: map[string]string{
		"X-RateLimit-Remaining": "41", "Set-Cookie": "session=secret", "X-Request-Id": "req-1",
	}}
	refunds := &behave.Counter{}
	other := &behave.Counter{}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", charges)
	mux.Handle("POST /v1/charges/{chargeId}/refunds", refunds)
	mux.Handle("/", other)
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore(), Principal: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	return mw(mux), charges, refunds, other
}

func TestCreateChargeReplaysAndRejects(t *testing.T) {
	h, charges, _, _ := server(t)
	alice := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "k-1"}

	first := behave.Do(t, h, "POST", "/v1/charges", alice, `{"amount":100,"currency":"eur"}`)
	behave.Want(t, "first request", first, http.StatusCreated, false)

	again := behave.Do(t, h, "POST", "/v1/charges", alice, `{"currency":"eur", "amount":100}`)
	behave.Want(t, "retry with the same key (keys reordered)", again, http.StatusCreated, true)
	if again.Body != first.Body {
		t.Errorf("replayed body %s, want %s", again.Body, first.Body)
	}
	if got := again.Header.Get("X-Ratelimit-Remaining"); got != "41" {
		t.Errorf("declared response header X-RateLimit-Remaining replayed as %q, want 41", got)
	}
	if got := again.Header.Get("X-Request-Id"); got != "req-1" {
		t.Errorf("replay-headers default X-Request-Id replayed as %q, want req-1", got)
	}
	if got := again.Header.Get("Set-Cookie"); got != "" {
		t.Errorf("Set-Cookie replayed: %q", got)
	}
	if n := charges.N.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}

	mismatch := behave.Do(t, h, "POST", "/v1/charges", alice, `{"amount":999,"currency":"eur"}`)
	behave.WantProblem(t, "same key, other body", mismatch, http.StatusUnprocessableEntity)

	noKey := behave.Do(t, h, "POST", "/v1/charges", map[string]string{"X-API-Key": "alice"}, `{"amount":1}`)
	behave.WantProblem(t, "no key", noKey, http.StatusBadRequest)

	// Keys are per principal: bob's k-1 is another record.
	bob := behave.Do(t, h, "POST", "/v1/charges", map[string]string{"X-API-Key": "bob", "Idempotency-Key": "k-1"}, `{"amount":100,"currency":"eur"}`)
	behave.Want(t, "another principal, same key", bob, http.StatusCreated, false)
	if n := charges.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestCreateChargeInProgress(t *testing.T) {
	h, charges, _, _ := server(t)
	hdr := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "k-busy"}
	first := behave.InProgress(t, h, charges, "POST", "/v1/charges", hdr, `{"amount":1}`, func() {
		r := behave.Do(t, h, "POST", "/v1/charges", hdr, `{"amount":1}`)
		behave.WantProblem(t, "duplicate while in progress", r, http.StatusConflict)
		if r.Header.Get("Retry-After") == "" {
			t.Error("409 without Retry-After")
		}
	})
	behave.Want(t, "held request", first, http.StatusCreated, false)
	behave.Want(t, "after completion", behave.Do(t, h, "POST", "/v1/charges", hdr, `{"amount":1}`), http.StatusCreated, true)
}

func TestRefundPathParametersAndSave5xx(t *testing.T) {
	h, _, refunds, _ := server(t)
	hdr := map[string]string{"X-Request-Key": "r-1"} // anonymous: no API key needed
	behave.Want(t, "refund ch_1", behave.Do(t, h, "POST", "/v1/charges/ch_1/refunds", hdr, `{}`), http.StatusOK, false)
	behave.Want(t, "refund ch_1 again", behave.Do(t, h, "POST", "/v1/charges/ch_1/refunds", hdr, `{}`), http.StatusOK, true)
	// The path parameter is part of the fingerprint.
	behave.WantProblem(t, "same key on ch_2", behave.Do(t, h, "POST", "/v1/charges/ch_2/refunds", hdr, `{}`), http.StatusUnprocessableEntity)
	behave.WantProblem(t, "default header is not the key here", behave.Do(t, h, "POST", "/v1/charges/ch_1/refunds", map[string]string{"Idempotency-Key": "x"}, `{}`), http.StatusBadRequest)

	// save: [2xx, 4xx, 5xx]: a 500 is saved and replayed.
	refunds.Status = http.StatusInternalServerError
	hdr5 := map[string]string{"X-Request-Key": "r-500"}
	behave.Want(t, "500", behave.Do(t, h, "POST", "/v1/charges/ch_3/refunds", hdr5, `{}`), http.StatusInternalServerError, false)
	behave.Want(t, "500 replayed", behave.Do(t, h, "POST", "/v1/charges/ch_3/refunds", hdr5, `{}`), http.StatusInternalServerError, true)
	if n := refunds.N.Load(); n != 2 {
		t.Errorf("refund handler ran %d times, want 2", n)
	}
}

func TestUnannotatedAndOptional(t *testing.T) {
	h, _, _, other := server(t)
	// GET has no annotation; PUT is x-idempotent: false: both untouched.
	behave.Want(t, "GET", behave.Do(t, h, "GET", "/v1/charges", nil, ""), http.StatusOK, false)
	behave.Want(t, "PUT", behave.Do(t, h, "PUT", "/v1/charges/ch_1", nil, `{}`), http.StatusOK, false)
	behave.Want(t, "PUT", behave.Do(t, h, "PUT", "/v1/charges/ch_1", nil, `{}`), http.StatusOK, false)
	// DELETE has required: false: without a key it runs unprotected.
	behave.Want(t, "DELETE without key", behave.Do(t, h, "DELETE", "/v1/charges/ch_1", nil, ""), http.StatusOK, false)
	behave.Want(t, "DELETE without key", behave.Do(t, h, "DELETE", "/v1/charges/ch_1", nil, ""), http.StatusOK, false)
	k := map[string]string{"Idempotency-Key": "d-1"}
	behave.Want(t, "DELETE with key", behave.Do(t, h, "DELETE", "/v1/charges/ch_1", k, ""), http.StatusOK, false)
	behave.Want(t, "DELETE with key again", behave.Do(t, h, "DELETE", "/v1/charges/ch_1", k, ""), http.StatusOK, true)
	// Outside the /v1 base path nothing matches.
	behave.Want(t, "POST /charges (no base path)", behave.Do(t, h, "POST", "/charges", nil, `{}`), http.StatusOK, false)
	if n := other.N.Load(); n != 7 {
		t.Errorf("fallback handler ran %d times, want 7", n)
	}
}

func TestAuthPolicyNeedsPrincipal(t *testing.T) {
	if _, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore()}); err == nil {
		t.Fatal("Middleware without Options.Principal accepted an auth policy")
	}
	if CreateChargePolicy.Principal != idemrt.PrincipalAuth || PostChargesChargeIDRefundsPolicy.Principal != idemrt.PrincipalAnonymous {
		t.Error("principal defaults do not follow the spec's security")
	}
}

func TestWrapOne(t *testing.T) {
	c := &behave.Counter{}
	h, err := WrapPostChargesChargeIDRefunds(idemrt.Options{Store: idemrt.NewMemoryStore()}, c)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"X-Request-Key": "w-1"}
	behave.Want(t, "wrapped", behave.Do(t, h, "POST", "/v1/charges/ch_9/refunds", hdr, `{}`), http.StatusOK, false)
	behave.Want(t, "wrapped again", behave.Do(t, h, "POST", "/v1/charges/ch_9/refunds", hdr, `{}`), http.StatusOK, true)
	if got := len(Policies()); got != 3 {
		t.Errorf("Policies() has %d policies, want 3", got)
	}
}

// The server's {version} variable has enum [v1, v2]: the policies are
// served under both base paths, so /v2/charges is protected too.
func TestEnumServerVariableEveryBasePath(t *testing.T) {
	h, _, _, other := server(t)
	alice := map[string]string{"X-API-Key": "alice", "Idempotency-Key": "v2-1"}
	behave.Want(t, "first /v2", behave.Do(t, h, "POST", "/v2/charges", alice, `{"amount":1}`), http.StatusOK, false)
	behave.Want(t, "retry /v2", behave.Do(t, h, "POST", "/v2/charges", alice, `{"amount":1}`), http.StatusOK, true)
	behave.WantProblem(t, "/v2 without a key", behave.Do(t, h, "POST", "/v2/charges", map[string]string{"X-API-Key": "alice"}, `{"amount":1}`), http.StatusBadRequest)
	hdr := map[string]string{"X-Request-Key": "r-v2"}
	behave.Want(t, "refund /v2", behave.Do(t, h, "POST", "/v2/charges/ch_1/refunds", hdr, `{}`), http.StatusOK, false)
	behave.Want(t, "refund /v2 again", behave.Do(t, h, "POST", "/v2/charges/ch_1/refunds", hdr, `{}`), http.StatusOK, true)
	if n := other.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
	// Not a server of the spec: passed through unprotected.
	behave.Want(t, "/v3 first", behave.Do(t, h, "POST", "/v3/charges", alice, `{"amount":1}`), http.StatusOK, false)
	behave.Want(t, "/v3 again", behave.Do(t, h, "POST", "/v3/charges", alice, `{"amount":1}`), http.StatusOK, false)
}
