package runtime_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// benchWriter is a minimal ResponseWriter, reset between iterations.
type benchWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *benchWriter) reset()                      { clear(w.h); w.code, w.n = 0, 0 }

// resetBody is a request body that can be rewound without allocating.
type resetBody struct {
	b   []byte
	off int
}

func (r *resetBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}
func (r *resetBody) Close() error { return nil }

var benchRequestBody = []byte(`{"amount":1000,"currency":"eur","customer":"cus_4QFOF3xrvBT2nU","description":"Order #1042","metadata":{"order_id":"1042","channel":"web"}}`)

var benchResponse = []byte(`{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","amount":1000,"currency":"eur","status":"succeeded"}`)

func benchHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Location"] = []string{"/v1/charges/ch_3MmlLrLkdIwHu7ix0snN0B15"}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(benchResponse)
	})
}

func benchRequest(key string) (*http.Request, *resetBody) {
	body := &resetBody{b: benchRequestBody}
	r, _ := http.NewRequest("POST", "http://api.example/v1/charges/ch_1", nil)
	r.Body = body
	r.ContentLength = int64(len(benchRequestBody))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	return r, body
}

func benchPolicy() *idemrt.Policy {
	return &idemrt.Policy{
		OperationID: "createCharge", Method: "POST", Route: "/charges/{id}", BasePaths: []string{"/v1"},
		Key: idemrt.KeyFromHeader, KeyName: "Idempotency-Key", Principal: idemrt.PrincipalAnonymous,
	}
}

func BenchmarkBareHandler(b *testing.B) { benchBare(b, benchHandler(), benchRequestBody) }

func BenchmarkWrappedReplay(b *testing.B) { benchReplay(b, benchHandler(), benchRequestBody) }

// The Small benchmarks are loadbench's noop and mem-replay cases in
// process: the body {"amount":100}, a 201 with one header.
var smallRequestBody = []byte(`{"amount":100}`)

func smallHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(benchResponse)
	})
}

func BenchmarkBareHandlerSmall(b *testing.B) { benchBare(b, smallHandler(), smallRequestBody) }

func BenchmarkWrappedReplaySmall(b *testing.B) { benchReplay(b, smallHandler(), smallRequestBody) }

// BenchmarkWrappedReplayBounded is WrappedReplaySmall on a store that the
// engine bounds (Options.StoreTimeout: it is not a *MemoryStore) and that
// uses its context as database/sql does on every query, each request with a
// context of its own under its connection's, as net/http gives it: what the
// runtime adds to a SQL store's replay, the bound included.
func BenchmarkWrappedReplayBounded(b *testing.B) {
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: sqlLikeStore{idemrt.NewMemoryStore()}}, benchPolicy())
	if err != nil {
		b.Fatal(err)
	}
	h := mw(smallHandler())
	r, body := benchRequest("replayed-key")
	body.b, r.ContentLength = smallRequestBody, int64(len(smallRequestBody))
	conn, closeConn := context.WithCancel(context.WithValue(context.Background(), http.LocalAddrContextKey, "127.0.0.1:8080"))
	defer closeConn()
	w := &benchWriter{h: http.Header{}}
	h.ServeHTTP(w, r) // first request: saved
	b.ReportAllocs()
	for b.Loop() {
		body.off = 0
		w.reset()
		ctx, cancel := context.WithCancel(conn)
		h.ServeHTTP(w, r.WithContext(ctx))
		cancel()
		if w.code != http.StatusCreated {
			b.Fatalf("status %d", w.code)
		}
	}
}

// sqlLikeStore is a MemoryStore that uses the context of a claim as
// database/sql does with a query's: Done, and a child context for the
// rows (which database/sql watches in a goroutine of its own).
type sqlLikeStore struct{ *idemrt.MemoryStore }

func (s sqlLikeStore) Claim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	if ctx.Done() != nil {
		rows, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := rows.Err(); err != nil {
			return idemrt.ClaimResult{}, err
		}
	}
	return s.MemoryStore.Claim(ctx, req)
}

func benchBare(b *testing.B, h http.Handler, reqBody []byte) {
	r, body := benchRequest("k")
	body.b, r.ContentLength = reqBody, int64(len(reqBody))
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		body.off = 0
		w.reset()
		h.ServeHTTP(w, r)
	}
}

func benchReplay(b *testing.B, next http.Handler, reqBody []byte) {
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, benchPolicy())
	if err != nil {
		b.Fatal(err)
	}
	h := mw(next)
	r, body := benchRequest("replayed-key")
	body.b, r.ContentLength = reqBody, int64(len(reqBody))
	w := &benchWriter{h: http.Header{}}
	h.ServeHTTP(w, r) // first request: saved
	b.ReportAllocs()
	for b.Loop() {
		body.off = 0
		w.reset()
		h.ServeHTTP(w, r)
		if w.code != http.StatusCreated {
			b.Fatalf("status %d", w.code)
		}
	}
}

func BenchmarkWrappedFirstRequest(b *testing.B) {
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, benchPolicy())
	if err != nil {
		b.Fatal(err)
	}
	h := mw(benchHandler())
	r, body := benchRequest("")
	w := &benchWriter{h: http.Header{}}
	keys := make([]string, 0, 1<<16)
	for i := 0; i < cap(keys); i++ {
		keys = append(keys, "key-"+strconv.Itoa(i))
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i == len(keys) { // fresh store, fresh keys
			b.StopTimer()
			mw, _ = idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, benchPolicy())
			h = mw(benchHandler())
			i = 0
			b.StartTimer()
		}
		r.Header["Idempotency-Key"] = keys[i : i+1]
		i++
		body.off = 0
		w.reset()
		h.ServeHTTP(w, r)
		if w.code != http.StatusCreated {
			b.Fatalf("status %d", w.code)
		}
	}
}

// jsonDoc builds a realistic JSON document of about size bytes: objects
// with unsorted keys, strings (some escaped), integers and decimals.
func jsonDoc(size int) []byte {
	type item struct {
		SKU      string            `json:"sku"`
		Name     string            `json:"name"`
		Qty      int               `json:"qty"`
		Price    float64           `json:"price"`
		Tags     []string          `json:"tags"`
		Attrs    map[string]string `json:"attrs"`
		Discount *float64          `json:"discount"`
	}
	var items []item
	for i := 0; ; i++ {
		items = append(items, item{
			SKU: fmt.Sprintf("SKU-%06d", i), Name: fmt.Sprintf("Widget \"%d\" – deluxe", i), Qty: i % 7,
			Price: float64(i%1000) + 0.99, Tags: []string{"blue", "large"},
			Attrs: map[string]string{"z": "last", "color": "blue", "a": "first"},
		})
		doc, _ := json.Marshal(map[string]any{"order_id": "ord_123", "customer": "cus_4QFOF3xrvBT2nU", "items": items, "total": 1234.5})
		if len(doc) >= size {
			return doc[:len(doc):len(doc)]
		}
	}
}

// apiDoc builds the easy counterpart of jsonDoc, shaped like a payments
// API request body (a checkout with line items): every object's keys
// already in sorted order (as encoding/json writes maps, and as many
// clients send them), plain ASCII strings without escapes, integers
// (minor units) and a few booleans and nulls.
func apiDoc(size int) []byte {
	var lines []any
	for i := 0; ; i++ {
		lines = append(lines, map[string]any{
			"amount": 1999 + i*100, "currency": "usd", "description": fmt.Sprintf("Pro plan, seat %d (monthly)", i),
			"discountable": i%3 != 0, "metadata": map[string]any{"line_id": fmt.Sprintf("li_%08d", i), "source": "web"},
			"price_data": map[string]any{"product": fmt.Sprintf("prod_NWjs8kKbJWm%04d", i), "tax_behavior": "exclusive", "unit_amount": 1999},
			"quantity":   1 + i%4, "tax_rates": []string{"txr_1MzS4p2eZvKYlo2C"}, "period": nil,
		})
		doc, _ := json.Marshal(map[string]any{
			"customer": "cus_4QFOF3xrvBT2nU", "collection_method": "charge_automatically", "currency": "usd",
			"line_items": lines, "metadata": map[string]any{"cart_id": "cart_7f3a", "channel": "web"},
			"payment_settings": map[string]any{"payment_method_types": []string{"card", "sepa_debit"}},
			"automatic_tax":    map[string]any{"enabled": true}, "days_until_due": nil,
		})
		if len(doc) >= size {
			return doc[:len(doc):len(doc)]
		}
	}
}

// benchDocs are the fingerprint benchmark documents by name: the hard
// orders (every item needs sorting and has escapes) and the easy API
// payloads (already canonical).
var benchDocs = []struct {
	name string
	doc  func(size int) []byte
}{{"", jsonDoc}, {"API", apiDoc}}

func benchFingerprint(b *testing.B, size int) {
	for _, d := range benchDocs {
		doc := d.doc(size)
		if d.name == "" {
			benchFingerprintDoc(b, doc)
			continue
		}
		b.Run(d.name, func(b *testing.B) { benchFingerprintDoc(b, doc) })
	}
}

func benchFingerprintDoc(b *testing.B, doc []byte) {
	b.Run("canonical", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := idemrt.Fingerprint("POST", "/orders", nil, "application/json", doc, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256-raw", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			_ = sha256.Sum256(doc)
		}
	})
}

func BenchmarkFingerprint1KiB(b *testing.B)  { benchFingerprint(b, 1<<10) }
func BenchmarkFingerprint64KiB(b *testing.B) { benchFingerprint(b, 64<<10) }

func TestBenchDocsAreJSON(t *testing.T) {
	for _, size := range []int{1 << 10, 64 << 10} {
		doc := jsonDoc(size)
		if !json.Valid(doc) || len(doc) < size || len(doc) > size*2 {
			t.Fatalf("doc of %d bytes for size %d", len(doc), size)
		}
		c, err := idemrt.CanonicalJSON(doc)
		if err != nil || bytes.Equal(c, doc) {
			t.Fatalf("the benchmark doc must need reordering: %v", err)
		}
		api := apiDoc(size)
		if !json.Valid(api) || len(api) < size || len(api) > size*2 {
			t.Fatalf("API doc of %d bytes for size %d", len(api), size)
		}
		c, err = idemrt.CanonicalJSON(api)
		if err != nil || !bytes.Equal(c, api) {
			t.Fatalf("the API benchmark doc must be canonical already: %v", err)
		}
	}
}
