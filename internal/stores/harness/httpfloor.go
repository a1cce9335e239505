package harness

import (
	"context"
	"net/http"
	"testing"
)

// HTTPFloor is a handler that sends a fixed sequence of statements for a
// first request, with no wrapper around it: what a design that sends those
// statements could reach at best.
type HTTPFloor struct {
	Name string
	// Do runs the sequence for one request: key is its idempotency key,
	// id and body the row the handler writes.
	Do func(ctx context.Context, key, id string, body []byte) error
}

// HTTPFloors measures floors against the bare INSERT handler of
// HTTPRatios (hb.Insert), through the same real net/http server and 16
// clients, in interleaved 250 ms slices (8 rounds per b.N), together with
// HTTPRatios' newkey and newkey-tx (that handler through idemrt.Wrap over
// hb.Store), so that the wrapper, the store and the floors are compared in
// one run. Each ratio is reported as name/insert, with the load average
// before and after.
func HTTPFloors(b *testing.B, hb HTTPBackend, floors []HTTPFloor) {
	load0 := loadAverage()
	mux := newHTTPMux(b, hb)
	for _, f := range floors {
		mux.HandleFunc("POST /floor/"+f.Name, func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			answerCreated(w, f.Do(r.Context(), key, key, httpBody))
		})
	}
	srv, client := serveHTTP(b, mux)
	postNew := func(path string) func(context.Context, int64) error { return postNewKey(client, srv.URL+path) }
	cases := []*benchCase{
		{name: "insert", fn: postNew("/bare")},
		{name: "newkey", fn: postNew("/charges")},
		{name: "newkey-tx", fn: postNew("/tx/charges")},
	}
	ratios := [][2]string{{"newkey", "insert"}, {"newkey-tx", "insert"}}
	for _, f := range floors {
		cases = append(cases, &benchCase{name: f.Name, fn: postNew("/floor/" + f.Name)})
		ratios = append(ratios, [2]string{f.Name, "insert"})
	}
	interleave(b, cases, ratios)
	b.ReportMetric(load0, "load1-start")
	b.ReportMetric(loadAverage(), "load1-end")
}
