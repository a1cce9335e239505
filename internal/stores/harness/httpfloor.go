package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
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
	handler := hb.insertHandler()
	wrap := func(route string, transactional bool) http.Handler {
		p := policy(transactional, time.Minute)
		p.Route = route
		p.OperationID = strings.ReplaceAll(route, "/", "_")
		w, err := idemrt.Wrap(idemrt.Options{Store: hb.Store}, p, http.HandlerFunc(handler))
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bare", handler)
	mux.Handle("POST /charges", wrap("/charges", false))
	mux.Handle("POST /tx/charges", wrap("/tx/charges", true))
	for _, f := range floors {
		mux.HandleFunc("POST /floor/"+f.Name, func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			answerCreated(w, f.Do(r.Context(), key, key, httpBody))
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: Clients, MaxIdleConnsPerHost: Clients, MaxConnsPerHost: Clients,
		DisableCompression: true,
	}}
	defer client.CloseIdleConnections()
	postNew := func(path string) func(context.Context, int64) error {
		return func(context.Context, int64) error {
			req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(requestJSON))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", NewKey())
			return do(client, req, http.StatusCreated)
		}
	}
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
