package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// HTTPBackend is what a dialect gives HTTPRatios: its store and one table
// "plain (id, body)" on the same database.
type HTTPBackend struct {
	Store idemrt.TxStore
	// Insert writes the row id: through the request's transaction (the
	// generated typed TxFromContext) when ctx carries one, else on its own.
	Insert func(ctx context.Context, id string, body []byte) error
	// Get reads the row id by its primary key.
	Get func(ctx context.Context, id string) ([]byte, error)
}

// httpRows is how many rows the bare GET cycles through, and how many
// completed keys the replays cycle through.
const httpRows = 1000

// httpBody is the handlers' answer, and what the rows hold.
var httpBody = []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)

// HTTPRatios measures what users pay: a real net/http server on
// 127.0.0.1 whose handler inserts one row, bare and protected (both
// modes), a bare primary-key GET of one row against replays of completed
// keys, and a bare no-op POST against replays from the in-memory store.
// 16 clients (keep-alive connections) send each case for 250 ms in turn,
// 8 rounds per b.N, so that a change of load on a shared machine hits both
// sides of a ratio alike. It reports each case's requests per second, the
// ratios, and the 1-minute load average before and after (load1-start,
// load1-end). The case post-get, a bare POST carrying the replay's request
// whose handler does the GET's work and answers as a replay does, is the
// floor of replay/get: replay/post-get is what the wrapper and the store
// cost over it, post-get/get what a POST with a body costs over a GET.
// IDEMGEN_BENCH_CASES selects cases (see interleave).
func HTTPRatios(b *testing.B, hb HTTPBackend) {
	load0 := loadAverage()
	noop := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(httpBody)
	}
	mux := newHTTPMux(b, hb)
	mux.HandleFunc("GET /rows/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, err := hb.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	// post-get is the floor of replay/get: a bare POST with the replay's
	// request (body, Content-Type, Idempotency-Key naming the row) whose
	// handler reads the body, does the GET's work and answers as a replay
	// does (201, the saved Content-Type, Idempotent-Replayed).
	mux.HandleFunc("POST /post-get", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, err := hb.Get(r.Context(), r.Header.Get("Idempotency-Key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
	})
	mux.HandleFunc("POST /noop", noop)
	mux.Handle("POST /mem/charges", wrapRoute(b, idemrt.NewMemoryStore(), "/mem/charges", false, noop))
	srv, client := serveHTTP(b, mux)
	post := func(c *http.Client, path, key string, want int) error { return postJSON(c, srv.URL+path, key, want) }
	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	rowID := func(i int64) string { return fmt.Sprintf("%s-row-%d", run, i%httpRows) }
	replayKey := func(i int64) string { return fmt.Sprintf("%s-replay-%d", run, i%httpRows) }
	ctx := context.Background()
	for i := range int64(httpRows) {
		if err := hb.Insert(ctx, rowID(i), httpBody); err != nil {
			b.Fatal(err)
		}
		if err := post(client, "/charges", replayKey(i), http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		if err := post(client, "/mem/charges", replayKey(i), http.StatusCreated); err != nil {
			b.Fatal(err)
		}
	}
	postNew := func(path string) func(context.Context, int64) error { return postNewKey(client, srv.URL+path) }
	postReplay := func(path string) func(context.Context, int64) error {
		return func(_ context.Context, i int64) error { return post(client, path, replayKey(i), http.StatusCreated) }
	}
	interleave(b, []*benchCase{
		{name: "insert", fn: postNew("/bare")},
		{name: "newkey", fn: postNew("/charges")},
		{name: "newkey-tx", fn: postNew("/tx/charges")},
		{name: "get", fn: func(_ context.Context, i int64) error {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/rows/"+rowID(i), nil)
			if err != nil {
				return err
			}
			return do(client, req, http.StatusOK)
		}},
		{name: "replay", fn: postReplay("/charges")},
		{name: "post-get", fn: func(_ context.Context, i int64) error {
			return post(client, "/post-get", rowID(i), http.StatusCreated)
		}},
		{name: "noop", fn: postNew("/noop")},
		{name: "mem-replay", fn: postReplay("/mem/charges")},
	}, [][2]string{
		{"newkey", "insert"}, {"newkey-tx", "insert"}, {"replay", "get"},
		{"replay", "post-get"}, {"post-get", "get"}, {"mem-replay", "noop"},
	})
	b.ReportMetric(load0, "load1-start")
	b.ReportMetric(loadAverage(), "load1-end")
}

// do sends req and requires status want, reading the whole body so that
// the connection is reused.
func do(c *http.Client, req *http.Request, want int) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, buf.Bytes())
	}
	return nil
}

// loadAverage is the 1-minute load average (Linux), or 0.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// insertHandler is the bare INSERT handler (the one the wrapped cases
// wrap): it inserts httpBody under the request's Idempotency-Key and
// answers as answerCreated does.
func (hb HTTPBackend) insertHandler() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answerCreated(w, hb.Insert(r.Context(), r.Header.Get("Idempotency-Key"), httpBody))
	}
}

// answerCreated answers 201 with httpBody, or 500 with err.
func answerCreated(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(httpBody)
}

// newHTTPMux is the mux HTTPRatios and HTTPFloors share: hb's bare INSERT
// handler at POST /bare, and the same handler wrapped over hb.Store at POST
// /charges and, transactional, POST /tx/charges.
func newHTTPMux(b *testing.B, hb HTTPBackend) *http.ServeMux {
	handler := hb.insertHandler()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bare", handler)
	mux.Handle("POST /charges", wrapRoute(b, hb.Store, "/charges", false, handler))
	mux.Handle("POST /tx/charges", wrapRoute(b, hb.Store, "/tx/charges", true, handler))
	return mux
}

// wrapRoute wraps h for route over st, with the benchmarks' policy.
func wrapRoute(b *testing.B, st idemrt.Store, route string, transactional bool, h http.HandlerFunc) http.Handler {
	p := policy(transactional, time.Minute)
	p.Route = route
	p.OperationID = strings.ReplaceAll(route, "/", "_")
	w, err := idemrt.Wrap(idemrt.Options{Store: st}, p, h)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// serveHTTP serves mux on a real loopback server, and returns it with the
// client the benchmarks send through: Clients keep-alive connections. Both
// are closed when b ends.
func serveHTTP(b *testing.B, mux *http.ServeMux) (*httptest.Server, *http.Client) {
	srv := httptest.NewServer(mux)
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: Clients, MaxIdleConnsPerHost: Clients, MaxConnsPerHost: Clients,
		DisableCompression: true,
	}}
	b.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
	})
	return srv, client
}

// postJSON posts the request body of the benchmarks to url with key, and
// requires status want.
func postJSON(c *http.Client, url, key string, want int) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(requestJSON))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return do(c, req, want)
}

// postNewKey is a case that posts to url with a new key each time and
// requires 201.
func postNewKey(c *http.Client, url string) func(context.Context, int64) error {
	return func(context.Context, int64) error { return postJSON(c, url, NewKey(), http.StatusCreated) }
}
