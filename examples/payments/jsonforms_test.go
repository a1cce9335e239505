package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Requests that encoding/json reads differently never share a fingerprint
// or a fields key (issue 21, item 4): member names equal once folded
// ("amount" and "Amount": a struct field gets the last of them) and
// numbers written another way (an int64 field refuses 1e2 and 100.0).
func TestBodiesGoDecodesDifferentlyDoNotMerge(t *testing.T) {
	srv, _, _ := newTestApp(t)
	call := func(path, key, body string) (*http.Response, string) {
		t.Helper()
		return post(t, srv, "acct_t", path, key, body)
	}
	charge := func(key, body string) (int, string) {
		res, b := call("/v1/charges", key, body)
		return res.StatusCode, b
	}

	// 1. The handler got amount 2, then would get 1: not a replay.
	if st, b := charge("fold", `{"amount":1,"Amount":2,"currency":"eur","customer":"c"}`); st != 201 || !strings.Contains(b, `"amount":2`) {
		t.Fatalf("first charge: %d %s", st, b)
	}
	res, b := call("/v1/charges", "fold", `{"Amount":2,"amount":1,"currency":"eur","customer":"c"}`)
	if res.StatusCode != 422 || res.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the members in the other order (the handler reads amount 1): %d %s, want 422", res.StatusCode, b)
	}

	// 2. 100 then 1e2: the second would be refused by the handler.
	if st, b := charge("num", `{"amount":100,"currency":"eur","customer":"c"}`); st != 201 {
		t.Fatalf("charge 100: %d %s", st, b)
	}
	for _, n := range []string{"1e2", "100.0", "1E+2"} {
		res, b := call("/v1/charges", "num", `{"amount":`+n+`,"currency":"eur","customer":"c"}`)
		if res.StatusCode != 422 {
			t.Errorf("amount %s after 100 under one key: %d %s, want 422", n, res.StatusCode, b)
		}
	}
	// In the other order, the saved 400 is not replayed to the valid request.
	if st, b := charge("num2", `{"amount":1e2,"currency":"eur","customer":"c"}`); st != 400 {
		t.Fatalf("amount 1e2 into an int64: %d %s, want the handler's 400", st, b)
	}
	res, b = call("/v1/charges", "num2", `{"amount":100,"currency":"eur","customer":"c"}`)
	if res.StatusCode != 422 {
		t.Errorf("amount 100 after a saved 400 for 1e2: %d %s, want 422", res.StatusCode, b)
	}
	// The same bytes, or the same members in another order and spacing,
	// still replay.
	res, b = call("/v1/charges", "num", ` { "customer":"c", "currency":"eur", "amount":100 }`)
	if res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same charge respaced: %d %s, want a replay", res.StatusCode, b)
	}

	// 3. A refund keyed by fields [charge, amount] with amount and Amount:
	// no key is derived from 5 while the handler refunds 500.
	st, b := charge("c1000", `{"amount":1000,"currency":"eur","customer":"c"}`)
	if st != 201 {
		t.Fatalf("charge: %d %s", st, b)
	}
	var ch struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(b), &ch); err != nil {
		t.Fatal(err)
	}
	res, b = call("/v1/refunds", "", `{"charge":"`+ch.ID+`","amount":5,"Amount":500}`)
	if res.StatusCode != 400 || !strings.Contains(b, "key-missing") {
		t.Errorf("refund with amount and Amount: %d %s, want the key-missing problem", res.StatusCode, b)
	}
	for range 2 {
		if res, b := call("/v1/refunds", "", `{"charge":"`+ch.ID+`","amount":500}`); res.StatusCode != 201 {
			t.Fatalf("refund 500: %d %s", res.StatusCode, b)
		}
	}
	gr, err := http.NewRequest("GET", srv.URL+"/v1/charges/"+ch.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	gr.Header.Set("Authorization", "Bearer acct_t")
	gres, err := http.DefaultClient.Do(gr)
	if err != nil {
		t.Fatal(err)
	}
	defer gres.Body.Close()
	var got Charge
	if err := json.NewDecoder(gres.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.AmountRefunded != 500 {
		t.Errorf("refunded %d after one refund of 500 (and a refused one), want 500", got.AmountRefunded)
	}
}
