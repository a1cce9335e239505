package webhooks31

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/golden/internal/behave"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

var _ = testutil.Update

func TestWebhookReceiver(t *testing.T) {
	c := &behave.Counter{}
	store := idemrt.NewMemoryStore()
	paid, err := WrapPaymentSucceeded(idemrt.Options{Store: store}, c)
	if err != nil {
		t.Fatal(err)
	}
	refunded, err := WrapPostRefundCreatedWebhook(idemrt.Options{Store: store}, c)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/payments", paid)
	mux.Handle("POST /webhooks/refunds", refunded)

	id := map[string]string{"Webhook-Id": "wh-1"}
	behave.Want(t, "delivery", behave.Do(t, mux, "POST", "/webhooks/payments", id, `{"amount":1}`), http.StatusOK, false)
	behave.Want(t, "redelivery", behave.Do(t, mux, "POST", "/webhooks/payments", id, `{"amount":1}`), http.StatusOK, true)
	behave.WantProblem(t, "same id, other payload", behave.Do(t, mux, "POST", "/webhooks/payments", id, `{"amount":2}`), http.StatusUnprocessableEntity)
	behave.WantProblem(t, "no Webhook-Id", behave.Do(t, mux, "POST", "/webhooks/payments", nil, `{"amount":1}`), http.StatusBadRequest)
	// Scopes differ per operation: the same id on another webhook is new.
	behave.Want(t, "other webhook, same id", behave.Do(t, mux, "POST", "/webhooks/refunds", id, `{"amount":1}`), http.StatusOK, false)
	r := behave.InProgress(t, mux, c, "POST", "/webhooks/refunds", map[string]string{"Webhook-Id": "wh-2"}, `{}`, func() {
		behave.WantProblem(t, "in progress", behave.Do(t, mux, "POST", "/webhooks/refunds", map[string]string{"Webhook-Id": "wh-2"}, `{}`), http.StatusConflict)
	})
	behave.Want(t, "held", r, http.StatusOK, false)
	if n := c.N.Load(); n != 3 {
		t.Errorf("handlers ran %d times, want 3", n)
	}
	if PaymentSucceededPolicy.TTL != 72*3600e9 {
		t.Errorf("TTL %v, want 72h", PaymentSucceededPolicy.TTL)
	}
}
