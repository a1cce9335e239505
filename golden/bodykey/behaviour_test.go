package bodykey

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update

func TestContentDerivedKey(t *testing.T) {
	c := &behave.Counter{Status: http.StatusCreated}
	mw, err := Middleware(idemrt.Options{Store: idemrt.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(c)
	behave.Want(t, "first", behave.Do(t, h, "POST", "/subscriptions", nil, `{"callbackUrl":"https://a.example"}`), http.StatusCreated, false)
	behave.Want(t, "identical content merges", behave.Do(t, h, "POST", "/subscriptions", nil, `{ "callbackUrl" : "https://a.example" }`), http.StatusCreated, true)
	behave.Want(t, "other content", behave.Do(t, h, "POST", "/subscriptions", nil, `{"callbackUrl":"https://b.example"}`), http.StatusCreated, false)
	r := behave.InProgress(t, h, c, "POST", "/subscriptions", nil, `{"callbackUrl":"https://c.example"}`, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, h, "POST", "/subscriptions", nil, `{"callbackUrl":"https://c.example"}`), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusCreated, false)
	if n := c.N.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}
}

// Callbacks have no route of their own: the consumer mounts their handler
// wherever its callback URL points, and wraps it.
func TestCallbackReceiver(t *testing.T) {
	c := &behave.Counter{Status: http.StatusNoContent}
	mux := http.NewServeMux()
	h, err := WrapCreateSubscriptionOnEventPost(idemrt.Options{Store: idemrt.NewMemoryStore()}, c)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("POST /hooks/events", h)
	ev := map[string]string{"Event-Id": "ev-1"}
	behave.Want(t, "event", behave.Do(t, mux, "POST", "/hooks/events", ev, `{"type":"x"}`), http.StatusNoContent, false)
	behave.Want(t, "redelivered event", behave.Do(t, mux, "POST", "/hooks/events", ev, `{"type":"x"}`), http.StatusNoContent, true)
	behave.WantProblem(t, "same event id, other payload", behave.Do(t, mux, "POST", "/hooks/events", ev, `{"type":"y"}`), http.StatusUnprocessableEntity)
	behave.WantProblem(t, "no event id", behave.Do(t, mux, "POST", "/hooks/events", nil, `{"type":"x"}`), http.StatusBadRequest)
	if n := c.N.Load(); n != 1 {
		t.Errorf("callback handler ran %d times, want 1", n)
	}
}
