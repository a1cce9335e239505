package otelidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/adapters/otelidem"
	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

type fixture struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	srv    http.Handler
}

// newFixture serves POST /orders through the real middleware on a
// MemoryStore, with otelidem's hooks and timed store, inside a span per
// request (as otelhttp would open it).
func newFixture(t *testing.T, store idemrt.Store, h http.Handler) *fixture {
	return newFixtureTx(t, store, false, h)
}

// newFixtureTx is newFixture with the operation transactional or not.
func newFixtureTx(t *testing.T, store idemrt.Store, transactional bool, h http.Handler) *fixture {
	t.Helper()
	f := &fixture{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans)).Tracer("test")
	m, err := otelidem.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: m.Store(store), Hooks: m.Hooks()}, &idemrt.Policy{
		OperationID:   "createOrder",
		Method:        http.MethodPost,
		Route:         "/orders",
		Key:           idemrt.KeyFromHeader,
		KeyName:       "Idempotency-Key",
		Principal:     idemrt.PrincipalAnonymous,
		Transactional: transactional,
	})
	if err != nil {
		t.Fatal(err)
	}
	inner := mw(h)
	f.srv = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), "POST /orders")
		defer span.End()
		inner.ServeHTTP(w, r.WithContext(ctx))
	})
	return f
}

func (f *fixture) post(key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return w
}

// collect returns the event counts by outcome and the store call counts by
// call (with error.type appended after a slash when set).
func (f *fixture) collect(t *testing.T) (events, calls map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	events, calls = map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelidem.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != "idempotency.events" {
					t.Errorf("unexpected sum %s", m.Name)
				}
				for _, dp := range data.DataPoints {
					out, _ := dp.Attributes.Value("idempotency.outcome")
					op, _ := dp.Attributes.Value("idempotency.operation")
					if op.AsString() != "createOrder" {
						t.Errorf("operation %q", op.AsString())
					}
					events[out.AsString()] += dp.Value
				}
			case metricdata.Histogram[float64]:
				if m.Name != "idempotency.store.duration" || m.Unit != "s" {
					t.Errorf("unexpected histogram %s (%s)", m.Name, m.Unit)
				}
				for _, dp := range data.DataPoints {
					call, _ := dp.Attributes.Value("idempotency.store.call")
					name := call.AsString()
					if et, ok := dp.Attributes.Value("error.type"); ok {
						name += "/" + et.AsString()
					}
					calls[name] += int64(dp.Count)
				}
			default:
				t.Errorf("unexpected metric %s %T", m.Name, m.Data)
			}
		}
	}
	return events, calls
}

func TestMetricsAndSpans(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "slow") {
			close(started)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "created %s", body)
	})
	f := newFixture(t, idemrt.NewMemoryStore(), h)

	if w := f.post("a", `{"n":1}`); w.Code != 201 {
		t.Fatalf("first: %d", w.Code)
	}
	if w := f.post("a", `{"n":1}`); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", w.Code, w.Header())
	}
	if w := f.post("a", `{"n":2}`); w.Code != 422 {
		t.Fatalf("mismatch: %d", w.Code)
	}
	done := make(chan int)
	go func() { done <- f.post("b", `"slow"`).Code }()
	<-started
	if w := f.post("b", `"slow"`); w.Code != 409 {
		t.Fatalf("conflict: %d", w.Code)
	}
	close(release)
	if code := <-done; code != 201 {
		t.Fatalf("slow first: %d", code)
	}

	events, calls := f.collect(t)
	wantEvents := map[string]int64{"claimed": 2, "completed": 2, "replayed": 1, "mismatch": 1, "conflict": 1}
	if fmt.Sprint(events) != fmt.Sprint(wantEvents) {
		t.Errorf("events %v, want %v", events, wantEvents)
	}
	wantCalls := map[string]int64{"claim": 5, "complete": 2}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Errorf("store calls %v, want %v", calls, wantCalls)
	}

	// One span per request, each marked with its claim's outcome.
	var outcomes []string
	for _, s := range f.spans.Ended() {
		attrs := attribute.NewSet(s.Attributes()...)
		out, _ := attrs.Value("idempotency.outcome")
		hash, _ := attrs.Value("idempotency.key_hash")
		key := map[string]string{idemrt.KeyDigest("a"): "a", idemrt.KeyDigest("b"): "b"}[hash.AsString()]
		if _, raw := attrs.Value("idempotency.key"); raw {
			t.Errorf("span %s carries the raw key", s.Name())
		}
		var names []string
		for _, e := range s.Events() {
			names = append(names, e.Name)
		}
		replayed, _ := attrs.Value("idempotency.replayed")
		outcomes = append(outcomes, fmt.Sprintf("%s:%s[%s]replayed=%v", key, out.AsString(), strings.Join(names, " "), replayed.AsBool()))
	}
	slices.Sort(outcomes)
	want := []string{
		"a:claimed[idempotency.claimed idempotency.completed]replayed=false",
		"a:mismatch[idempotency.mismatch]replayed=false",
		"a:replayed[idempotency.replayed]replayed=true",
		"b:claimed[idempotency.claimed idempotency.completed]replayed=false",
		"b:conflict[idempotency.conflict]replayed=false",
	}
	if !slices.Equal(outcomes, want) {
		t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(outcomes, "\n"), strings.Join(want, "\n"))
	}
}

// failingStore fails every claim, like an unreachable database.
type failingStore struct{ idemrt.Store }

func (failingStore) Claim(context.Context, idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	return idemrt.ClaimResult{}, context.DeadlineExceeded
}

func TestStoreErrorIsCountedAndRecorded(t *testing.T) {
	f := newFixture(t, failingStore{idemrt.NewMemoryStore()}, http.NotFoundHandler())
	if w := f.post("a", `{}`); w.Code != 503 {
		t.Fatalf("got %d, want 503", w.Code)
	}
	events, calls := f.collect(t)
	if fmt.Sprint(events) != "map[store_error:1]" || fmt.Sprint(calls) != "map[claim/timeout:1]" {
		t.Errorf("events %v calls %v", events, calls)
	}
	spans := f.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := attribute.NewSet(spans[0].Attributes()...)
	if out, _ := attrs.Value("idempotency.outcome"); out.AsString() != "store_error" {
		t.Errorf("span outcome %q", out.AsString())
	}
	var names []string
	for _, e := range spans[0].Events() {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "exception,idempotency.store_error" {
		t.Errorf("span events %v", names)
	}
}

// txStore is a TxStore whose transactions have a recognizable handle.
type txStore struct{ idemrt.Store }

func (txStore) BeginTx(context.Context) (idemrt.Tx, error) { return fakeTx{}, nil }

type fakeTx struct{}

func (fakeTx) Handle() any                                       { return "driver tx" }
func (fakeTx) Complete(context.Context, idemrt.Completion) error { return nil }
func (fakeTx) Commit(context.Context) error                      { return nil }
func (fakeTx) Rollback(context.Context) error                    { return errors.New("already committed") }

// claimTxStore is a txStore that claims inside its transaction (the
// one-commit transactional mode), counting its BeginClaim calls.
type claimTxStore struct {
	txStore
	begun *int
}

func (s claimTxStore) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	*s.begun++
	res, err := s.Claim(ctx, req)
	if err != nil || res.State != idemrt.Acquired {
		return nil, res, err
	}
	return fakeTx{}, res, nil
}

// The timed store keeps a ClaimTxStore one: transactional operations keep
// committing once through the store's BeginClaim (not Claim then BeginTx),
// the driver's transaction reaches the handler, and BeginClaim and the
// transaction's calls are timed.
func TestStoreKeepsClaimTx(t *testing.T) {
	m, err := otelidem.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Store(txStore{idemrt.NewMemoryStore()}).(idemrt.ClaimTxStore); ok {
		t.Error("a TxStore without BeginClaim became a ClaimTxStore")
	}
	var begun int
	store := claimTxStore{txStore{idemrt.NewMemoryStore()}, &begun}
	if _, ok := m.Store(store).(idemrt.ClaimTxStore); !ok {
		t.Fatal("a ClaimTxStore lost BeginClaim")
	}
	var handle any
	f := newFixtureTx(t, store, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idemrt.TxFromContext(r.Context())
		handle = tx.Handle()
		w.WriteHeader(201)
	}))
	if w := f.post("k", `{}`); w.Code != 201 || handle != "driver tx" {
		t.Fatalf("got %d, handle %v", w.Code, handle)
	}
	if begun != 1 {
		t.Errorf("BeginClaim called %d times, want 1", begun)
	}
	_, calls := f.collect(t)
	wantCalls := map[string]int64{"begin_claim": 1, "commit": 1, "tx_complete": 1}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Errorf("store calls %v, want %v", calls, wantCalls)
	}
}

// The timed store keeps a TxStore a TxStore, and the driver's transaction
// reaches the handler unchanged.
func TestStoreKeepsTransactions(t *testing.T) {
	m, err := otelidem.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Embedding the interface hides MemoryStore's BeginTx.
	if _, ok := m.Store(struct{ idemrt.Store }{idemrt.NewMemoryStore()}).(idemrt.TxStore); ok {
		t.Error("a plain Store became a TxStore")
	}
	txs, ok := m.Store(txStore{idemrt.NewMemoryStore()}).(idemrt.TxStore)
	if !ok {
		t.Fatal("a TxStore lost BeginTx")
	}
	var handle any
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: txs, Hooks: m.Hooks()}, &idemrt.Policy{
		OperationID: "createOrder", Method: http.MethodPost, Route: "/orders",
		Key: idemrt.KeyFromHeader, KeyName: "Idempotency-Key", Principal: idemrt.PrincipalAnonymous,
		Transactional: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idemrt.TxFromContext(r.Context())
		handle = tx.Handle()
		w.WriteHeader(201)
	}))
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != 201 || handle != "driver tx" {
		t.Fatalf("got %d, handle %v", w.Code, handle)
	}
}

type namedStore struct {
	*idemrt.MemoryStore
	id string
}

func (s namedStore) StoreIdentity() string { return s.id }

// The timed store keeps its store's identity (idemrt.StoreIdentifier), so
// that the runtime knows two timed stores of one table for one store (a
// wrapper mounted twice over them answers 500 mounted-twice).
func TestStoreKeepsIdentity(t *testing.T) {
	m, err := otelidem.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []idemrt.Store{namedStore{idemrt.NewMemoryStore(), "db/table"}, txStore{idemrt.NewMemoryStore()}} {
		want := ""
		if si, ok := st.(idemrt.StoreIdentifier); ok {
			want = si.StoreIdentity()
		}
		si, ok := m.Store(st).(idemrt.StoreIdentifier)
		if !ok {
			t.Errorf("%T: the timed store has no StoreIdentity", st)
		} else if got := si.StoreIdentity(); got != want {
			t.Errorf("%T: timed store's identity %q, want %q", st, got, want)
		}
	}
}
