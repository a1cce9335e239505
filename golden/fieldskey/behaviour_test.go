package fieldskey

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
	mux := http.NewServeMux()
	mux.Handle("POST /shipments", c)
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	return mw(mux), c
}

func TestKeyFromBusinessFields(t *testing.T) {
	h, c := server(t)
	body := `{"order":{"id":"o-1"},"carrier":"ups","note":"first"}`
	behave.Want(t, "first", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusCreated, false)
	// No key header: the key is the order id and the carrier. The note is
	// outside fingerprint.include, so a different note still replays.
	again := behave.Do(t, h, "POST", "/shipments", nil, `{"carrier":"ups","note":"second","order":{"id":"o-1"}}`)
	behave.Want(t, "same order and carrier", again, http.StatusCreated, true)
	behave.Want(t, "another order", behave.Do(t, h, "POST", "/shipments", nil, `{"order":{"id":"o-2"},"carrier":"ups"}`), http.StatusCreated, false)
	behave.WantProblem(t, "fields missing", behave.Do(t, h, "POST", "/shipments", nil, `{"carrier":"ups"}`), http.StatusBadRequest)
	if n := c.N.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestFieldsMismatchAndConflict(t *testing.T) {
	h, c := server(t)
	body := `{"order":{"id":"o-9","total":5},"carrier":"dhl"}`
	r := behave.InProgress(t, h, c, "POST", "/shipments", nil, body, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
	// /order is in the fingerprint: same key fields, other order content.
	behave.WantProblem(t, "other order total", behave.Do(t, h, "POST", "/shipments", nil, `{"order":{"id":"o-9","total":6},"carrier":"dhl"}`), http.StatusUnprocessableEntity)
}

func TestSaveRuleKeeps409(t *testing.T) {
	h, c := server(t)
	c.Status = http.StatusConflict // save: [2xx, 409]
	body := `{"order":{"id":"o-3"},"carrier":"ups"}`
	behave.Want(t, "409 from the handler", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusConflict, false)
	behave.Want(t, "409 replayed", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusConflict, true)
	c.Status = http.StatusBadRequest // 4xx is not saved here: released, runs again
	body = `{"order":{"id":"o-4"},"carrier":"ups"}`
	behave.Want(t, "400", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusBadRequest, false)
	behave.Want(t, "400 not saved", behave.Do(t, h, "POST", "/shipments", nil, body), http.StatusBadRequest, false)
	if n := c.N.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}
}
