package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// HTTPBackend is what a dialect gives the HTTP benchmarks: its store and
// one table "plain (id, body)" on the same database.
type HTTPBackend struct {
	Store idemrt.TxStore
	// Insert writes the row id: through the request's transaction (the
	// generated typed TxFromContext) when ctx carries one, else on its own.
	Insert func(ctx context.Context, id string, body []byte) error
	// InsertIn writes the row id inside tx, a transaction of Store (its
	// Handle is the driver's transaction): what Insert does in a
	// transactional request, for the floors that open the transaction
	// themselves. Nil leaves those floors out.
	InsertIn func(ctx context.Context, tx idemrt.Tx, id string, body []byte) error
	// Get reads the row id by its primary key.
	Get func(ctx context.Context, id string) ([]byte, error)
	// Save writes a saved response under id into the backend's table
	// "saved (id, v, expires_at)", v one column (see SavedRow.Pack), and
	// GetSaved reads v back, by its primary key, when it expires after now:
	// the replay floor's table (floor-replay). Both nil leave that floor out;
	// one alone is refused.
	Save     func(ctx context.Context, id string, v []byte, expires time.Time) error
	GetSaved func(ctx context.Context, id string, now time.Time) ([]byte, error)
}

// HTTPFloor is a handler that sends a fixed sequence of statements for a
// first request, with no wrapper around it: what a design that sends those
// statements could reach at best.
type HTTPFloor struct {
	Name string
	// Do runs the sequence for one request: key is its idempotency key,
	// id and body the row the handler writes.
	Do func(ctx context.Context, key, id string, body []byte) error
}

// HTTPRows is how many rows the bare GET cycles through, and how many
// completed keys the replays cycle through.
const HTTPRows = 1000

// RequestJSON is the body every benchmark request carries.
const RequestJSON = `{"amount":100}`

// httpBody is the handlers' answer, and what the rows hold.
var httpBody = []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)

// KeyKind is what a case's request names.
type KeyKind int

const (
	// FreshKey: a new Idempotency-Key each request.
	FreshKey KeyKind = iota + 1
	// ReplayKey: one of the HTTPRows keys HTTPService.Seed completed.
	ReplayKey
	// RowKey: an Idempotency-Key naming one of the HTTPRows seeded rows.
	RowKey
	// RowPath: a GET of one of the HTTPRows seeded rows, named in the path.
	RowPath
)

// HTTPCase is one kind of request the HTTP benchmarks send, and what its
// answers must be: the status of every answer, whether every answer is a
// replay (Idempotent-Replayed: true) or none is, and whether the handler
// behind the route runs once per request or never.
type HTTPCase struct {
	Name   string
	Method string
	// Path is the request's path; for RowPath the row's id follows it.
	Path     string
	Key      KeyKind
	Status   int
	Replayed bool
	Runs     bool
}

// Ratios of the HTTP benchmarks, num/den: a first request (both modes)
// against the bare INSERT handler, a replay (both modes) against the bare
// GET and against post-get (the replay's request over a bare handler
// doing the GET's read: its floor in round trips), post-get against the
// GET (what a POST with a body costs over a GET), and the memory store's
// replay against a bare POST. Floors add name/insert; a backend with the
// replay floor's table adds replay/floor-replay and floor-replay/get.
var httpRatios = [][2]string{
	{"newkey", "insert"}, {"newkey-tx", "insert"}, {"replay", "get"},
	{"replay", "post-get"}, {"replay-tx", "get"}, {"replay-tx", "post-get"},
	{"post-get", "get"}, {"mem-replay", "noop"},
}

// HTTPService is the server side of the HTTP benchmarks, shared by the
// in-process BenchmarkHTTP/BenchmarkHTTPFloor and the external load
// generator (internal/stores/harness/cmd/loadbench): the bare and
// protected handlers over one HTTPBackend, the floors, and per route the
// counts that prove what a run measured (statuses, replays, handler runs).
type HTTPService struct {
	// Prefix names this service's seeded rows (Prefix-row-N) and completed
	// keys (Prefix-replay-N), N < HTTPRows.
	Prefix string
	Cases  []HTTPCase
	Ratios [][2]string

	hb       HTTPBackend
	mux      *http.ServeMux
	routes   map[string]*routeStats
	inflight atomic.Int64

	open atomic.Int64 // connections, with ConnState
}

// ConnState is an http.Server's ConnState hook: with it, Stats counts the
// server's open connections (Open).
func (s *HTTPService) ConnState(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		s.open.Add(-1)
	}
}

// routeStats counts one route's answers.
type routeStats struct {
	requests, replayed, runs, abandoned atomic.Int64
	mu                                  sync.Mutex
	statuses                            map[int]int64
	errorSample                         string
}

// RouteStats is a snapshot of one route's counts.
type RouteStats struct {
	// Requests counts the answered requests: those whose client was still
	// there when the handler returned.
	Requests int64 `json:"requests"`
	// Abandoned counts the requests whose client went away before the
	// answer (as a load generator does with the requests in flight when
	// it stops): their answers, errors of a cancelled context, reach no one
	// and count nowhere else.
	Abandoned int64 `json:"abandoned"`
	// Statuses counts the answers by status code.
	Statuses map[int]int64 `json:"statuses"`
	// Replayed counts the answers with Idempotent-Replayed: true.
	Replayed int64 `json:"replayed"`
	// Runs counts the runs of the handler behind the route (under the
	// wrapper, for the protected routes).
	Runs int64 `json:"runs"`
	// ErrorSample is the start of the last answer with a status of 400 or
	// more: what went wrong.
	ErrorSample string `json:"error_sample,omitempty"`
}

// ServiceStats is what GET StatsPath answers.
type ServiceStats struct {
	// InFlight is how many requests the service is serving, this one
	// left out.
	InFlight int64 `json:"inflight"`
	// Open is how many connections the server has open, this request's
	// included (see ConnState): a request that reached the server's
	// socket but that it has not read yet counts in no other number, yet
	// will be served. Zero unless the server reports to ConnState.
	Open   int64                 `json:"open"`
	Routes map[string]RouteStats `json:"routes"`
}

// StatsPath is where an HTTPService answers its ServiceStats.
const StatsPath = "/_load/stats"

// NewHTTPService builds the routes of the HTTP benchmarks over hb:
//
//	POST /bare            the bare handler: inserts one row, answers 201
//	POST /charges         the same handler through idemrt.Wrap over hb.Store
//	POST /tx/charges      the same, transactional: true
//	GET  /rows/{id}       the bare GET of one row by primary key
//	POST /post-get        the replay's request over a bare handler doing the GET's read
//	POST /floor-replay    the replay's request over a bare handler doing what any
//	                      replay must (hb.Save and hb.GetSaved; see floorReplay)
//	POST /noop            answers 201, no database
//	POST /mem/charges     the noop handler through idemrt.Wrap over idemrt.NewMemoryStore()
//	POST /floor/{name}    each floor, answering 201
//
// with one case each (and replay, replay-tx, mem-replay: the wrapped
// routes with completed keys).
func NewHTTPService(hb HTTPBackend, floors []HTTPFloor) (*HTTPService, error) {
	if hb.Store == nil || hb.Insert == nil || hb.Get == nil {
		return nil, errors.New("harness: an HTTPBackend needs Store, Insert and Get")
	}
	// The replay floor needs both: one alone would leave floor-replay out
	// without a word.
	saved := hb.Save != nil
	if saved != (hb.GetSaved != nil) {
		return nil, errors.New("harness: an HTTPBackend sets Save and GetSaved together, or neither")
	}
	s := &HTTPService{
		Prefix: fmt.Sprintf("r%d", time.Now().UnixNano()),
		hb:     hb,
		mux:    http.NewServeMux(),
		routes: map[string]*routeStats{},
	}
	insert := func(w http.ResponseWriter, r *http.Request) {
		answerCreated(w, hb.Insert(r.Context(), r.Header.Get("Idempotency-Key"), httpBody))
	}
	// The transactional route's rows are named apart ("tx-" and the key),
	// so that Seed can complete the same replay keys on both routes.
	insertTx := func(w http.ResponseWriter, r *http.Request) {
		answerCreated(w, hb.Insert(r.Context(), "tx-"+r.Header.Get("Idempotency-Key"), httpBody))
	}
	noop := func(w http.ResponseWriter, r *http.Request) { answerCreated(w, nil) }
	s.handle(http.MethodPost, "/bare", insert)
	for _, route := range []struct {
		path          string
		st            idemrt.Store
		transactional bool
		h             http.HandlerFunc
	}{
		{"/charges", hb.Store, false, insert},
		{"/tx/charges", hb.Store, true, insertTx},
		{"/mem/charges", idemrt.NewMemoryStore(), false, noop},
	} {
		p := policy(route.transactional, time.Minute)
		p.Route = route.path
		p.OperationID = strings.ReplaceAll(route.path, "/", "_")
		if err := s.handleWrapped(route.path, func(h http.Handler) (http.Handler, error) {
			return idemrt.Wrap(idemrt.Options{Store: route.st}, p, h)
		}, route.h); err != nil {
			return nil, err
		}
	}
	s.handle(http.MethodGet, "/rows/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, err := hb.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	s.handle(http.MethodPost, "/post-get", postGet(hb.Get))
	s.handle(http.MethodPost, "/noop", noop)
	if saved {
		s.handle(http.MethodPost, "/floor-replay", floorReplay(hb.GetSaved))
	}
	s.Cases = []HTTPCase{
		{Name: "insert", Method: "POST", Path: "/bare", Key: FreshKey, Status: 201, Runs: true},
		{Name: "newkey", Method: "POST", Path: "/charges", Key: FreshKey, Status: 201, Runs: true},
		{Name: "newkey-tx", Method: "POST", Path: "/tx/charges", Key: FreshKey, Status: 201, Runs: true},
		{Name: "get", Method: "GET", Path: "/rows/", Key: RowPath, Status: 200, Runs: true},
		{Name: "replay", Method: "POST", Path: "/charges", Key: ReplayKey, Status: 201, Replayed: true},
		{Name: "replay-tx", Method: "POST", Path: "/tx/charges", Key: ReplayKey, Status: 201, Replayed: true},
		{Name: "post-get", Method: "POST", Path: "/post-get", Key: RowKey, Status: 201, Replayed: true, Runs: true},
		{Name: "noop", Method: "POST", Path: "/noop", Key: FreshKey, Status: 201, Runs: true},
		{Name: "mem-replay", Method: "POST", Path: "/mem/charges", Key: ReplayKey, Status: 201, Replayed: true},
	}
	s.Ratios = append([][2]string(nil), httpRatios...)
	if saved {
		s.Cases = append(s.Cases, HTTPCase{Name: "floor-replay", Method: "POST", Path: "/floor-replay", Key: RowKey, Status: 201, Replayed: true, Runs: true})
		s.Ratios = append(s.Ratios, [2]string{"replay", "floor-replay"}, [2]string{"floor-replay", "get"})
	}
	// The floors run right after the first requests they bound, so that
	// the sides of their ratios over insert run close together.
	var floorCases []HTTPCase
	for _, f := range floors {
		path := "/floor/" + f.Name
		s.handle(http.MethodPost, path, func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			answerCreated(w, f.Do(r.Context(), key, key, httpBody))
		})
		floorCases = append(floorCases, HTTPCase{Name: f.Name, Method: "POST", Path: path, Key: FreshKey, Status: 201, Runs: true})
		s.Ratios = append(s.Ratios, [2]string{f.Name, "insert"})
	}
	s.Cases = slices.Insert(s.Cases, 3, floorCases...)
	s.mux.HandleFunc("GET "+StatsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Stats())
	})
	return s, nil
}

// handle serves h at method path, counted.
func (s *HTTPService) handle(method, path string, h http.HandlerFunc) {
	rs := s.newRoute(path)
	s.serve(method, path, rs, rs.counted(h))
}

// handleWrapped serves h through wrap at POST path, counted: the route's
// runs are h's, not the wrapper's.
func (s *HTTPService) handleWrapped(path string, wrap func(http.Handler) (http.Handler, error), h http.HandlerFunc) error {
	rs := s.newRoute(path)
	wrapped, err := wrap(rs.counted(h))
	if err != nil {
		return err
	}
	s.serve(http.MethodPost, path, rs, wrapped)
	return nil
}

func (s *HTTPService) newRoute(path string) *routeStats {
	rs := &routeStats{statuses: map[int]int64{}}
	s.routes[path] = rs
	return rs
}

// counted counts h's runs.
func (rs *routeStats) counted(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.runs.Add(1)
		h(w, r)
	})
}

// serve serves h at method path, counting its answers in rs.
func (s *HTTPService) serve(method, path string, rs *routeStats, h http.Handler) {
	s.mux.Handle(method+" "+path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		cw := countingWriter{ResponseWriter: w}
		h.ServeHTTP(&cw, r)
		if r.Context().Err() != nil {
			rs.abandoned.Add(1)
			return
		}
		if cw.status == 0 {
			cw.status = http.StatusOK
		}
		rs.requests.Add(1)
		if cw.replayed {
			rs.replayed.Add(1)
		}
		rs.mu.Lock()
		rs.statuses[cw.status]++
		if cw.status >= 400 {
			rs.errorSample = fmt.Sprintf("%d %s", cw.status, cw.head)
		}
		rs.mu.Unlock()
	}))
}

// countingWriter notes the status and whether the answer is a replay.
type countingWriter struct {
	http.ResponseWriter
	status   int
	replayed bool
	head     []byte // the start of an error answer's body
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.replayed = w.Header().Get("Idempotent-Replayed") == "true"
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status >= 400 && len(w.head) < 200 {
		w.head = append(w.head, p[:min(len(p), 200-len(w.head))]...)
	}
	return w.ResponseWriter.Write(p)
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP serves the routes.
func (s *HTTPService) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// RowID is the id of the i-th seeded row (i modulo HTTPRows).
func (s *HTTPService) RowID(i int64) string { return fmt.Sprintf("%s-row-%d", s.Prefix, i%HTTPRows) }

// ReplayKeyOf is the i-th completed key (i modulo HTTPRows).
func (s *HTTPService) ReplayKeyOf(i int64) string {
	return fmt.Sprintf("%s-replay-%d", s.Prefix, i%HTTPRows)
}

// Seed inserts the HTTPRows rows the GETs read and completes the HTTPRows
// keys the replays send, on /charges and /mem/charges, through the
// service's own handlers. It does not count in Stats.
func (s *HTTPService) Seed(ctx context.Context) error {
	for i := range int64(HTTPRows) {
		if err := s.hb.Insert(ctx, s.RowID(i), httpBody); err != nil {
			return fmt.Errorf("seed row: %w", err)
		}
		if s.hb.Save != nil {
			if err := s.hb.Save(ctx, s.RowID(i), savedRow.Pack(), time.Now().Add(24*time.Hour)); err != nil {
				return fmt.Errorf("seed saved row: %w", err)
			}
		}
		for _, path := range []string{"/charges", "/tx/charges", "/mem/charges"} {
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(RequestJSON))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", s.ReplayKeyOf(i))
			w := httptest.NewRecorder()
			s.mux.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				return fmt.Errorf("seed %s: status %d: %.200s", path, w.Code, w.Body.Bytes())
			}
		}
	}
	s.Reset()
	return nil
}

// Reset sets the counts to zero.
func (s *HTTPService) Reset() {
	for _, rs := range s.routes {
		rs.requests.Store(0)
		rs.replayed.Store(0)
		rs.runs.Store(0)
		rs.abandoned.Store(0)
		rs.mu.Lock()
		clear(rs.statuses)
		rs.errorSample = ""
		rs.mu.Unlock()
	}
}

// Stats returns the counts of every route.
func (s *HTTPService) Stats() ServiceStats {
	st := ServiceStats{InFlight: s.inflight.Load(), Open: s.open.Load(), Routes: map[string]RouteStats{}}
	for path, rs := range s.routes {
		rs.mu.Lock()
		statuses := make(map[int]int64, len(rs.statuses))
		for k, v := range rs.statuses {
			statuses[k] = v
		}
		sample := rs.errorSample
		rs.mu.Unlock()
		st.Routes[path] = RouteStats{
			Requests: rs.requests.Load(), Statuses: statuses,
			Replayed: rs.replayed.Load(), Runs: rs.runs.Load(), Abandoned: rs.abandoned.Load(), ErrorSample: sample,
		}
	}
	return st
}

// Route is the route a case's requests count under in Stats.
func (c HTTPCase) Route() string {
	if c.Key == RowPath {
		return strings.TrimSuffix(c.Path, "/") + "/{id}"
	}
	return c.Path
}

// Check says what is wrong with d, the counts of c's route over a run of
// c alone in which the client saw sent answers (0: not known) over at most
// conns connections: an answer with another status, replays where there
// should be none or missing, the handler running where it should not or
// not once per request, more abandoned requests than connections. A run
// that passes measured the path it names, not an error or a replay by
// mistake.
func (c HTTPCase) Check(d RouteStats, sent int64, conns int) error {
	var errs []string
	if d.Requests == 0 {
		errs = append(errs, "no request reached the route")
	}
	if sent > 0 && (d.Requests < sent || d.Requests > sent+int64(conns)) {
		errs = append(errs, fmt.Sprintf("the client counted %d answers, the server %d", sent, d.Requests))
	}
	if d.Abandoned > int64(conns) {
		errs = append(errs, fmt.Sprintf("%d requests abandoned by the client, more than its %d connections", d.Abandoned, conns))
	}
	for status, n := range d.Statuses {
		if status != c.Status && n > 0 {
			errs = append(errs, fmt.Sprintf("%d answers with status %d (want %d)", n, status, c.Status))
		}
	}
	if c.Replayed && d.Replayed != d.Requests {
		errs = append(errs, fmt.Sprintf("%d of %d answers were replays (want all)", d.Replayed, d.Requests))
	}
	if !c.Replayed && d.Replayed != 0 {
		errs = append(errs, fmt.Sprintf("%d of %d answers were replays (want none)", d.Replayed, d.Requests))
	}
	// An abandoned request may or may not have run the handler.
	if c.Runs && (d.Runs < d.Requests || d.Runs > d.Requests+d.Abandoned) {
		errs = append(errs, fmt.Sprintf("the handler ran %d times for %d requests and %d abandoned (want once each: fresh keys)", d.Runs, d.Requests, d.Abandoned))
	}
	if !c.Runs && d.Runs != 0 {
		errs = append(errs, fmt.Sprintf("the handler ran %d times for %d requests (want never: replays)", d.Runs, d.Requests))
	}
	if d.ErrorSample != "" {
		errs = append(errs, "the last error answer: "+strings.TrimSpace(d.ErrorSample))
	}
	if len(errs) > 0 {
		return fmt.Errorf("case %s (%s %s): %s", c.Name, c.Method, c.Path, strings.Join(errs, "; "))
	}
	return nil
}

// Sub is the counts of s minus those of before.
func (s RouteStats) Sub(before RouteStats) RouteStats {
	d := RouteStats{
		Requests: s.Requests - before.Requests, Replayed: s.Replayed - before.Replayed,
		Runs: s.Runs - before.Runs, Abandoned: s.Abandoned - before.Abandoned, Statuses: map[int]int64{},
	}
	if s.ErrorSample != before.ErrorSample {
		d.ErrorSample = s.ErrorSample
	}
	for k, v := range s.Statuses {
		if v -= before.Statuses[k]; v != 0 {
			d.Statuses[k] = v
		}
	}
	return d
}

// Request builds the i-th request of c to base (http://host:port).
func (s *HTTPService) Request(base string, c HTTPCase, i int64) (*http.Request, error) {
	if c.Key == RowPath {
		return http.NewRequest(c.Method, base+c.Path+s.RowID(i), nil)
	}
	req, err := http.NewRequest(c.Method, base+c.Path, strings.NewReader(RequestJSON))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch c.Key {
	case FreshKey:
		req.Header.Set("Idempotency-Key", NewKey())
	case ReplayKey:
		req.Header.Set("Idempotency-Key", s.ReplayKeyOf(i))
	case RowKey:
		req.Header.Set("Idempotency-Key", s.RowID(i))
	}
	return req, nil
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
