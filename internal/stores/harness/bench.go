package harness

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Clients is the number of concurrent clients of the benchmarks.
const Clients = 16

// NewKey returns a random version 4 UUID, the key clients are told to send
// (Stripe's and Square's API documentation recommend one): the benchmarks'
// new keys, and the baseline's new primary keys, land all over the index
// rather than all on its last page.
func NewKey() string {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[:8], u[:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Baseline is the plain SQL the store benchmarks are compared with, on the
// same pool: a single-row INSERT of a new primary key, and a SELECT by
// primary key of one of Preloaded rows.
type Baseline struct {
	Insert    func(ctx context.Context, id string) error
	Select    func(ctx context.Context, id string) error
	Preloaded func(i int) string
	Rows      int
}

// parallel runs fn from Clients goroutines and reports requests per second.
func parallel(b *testing.B, fn func(ctx context.Context, i int64) error) {
	b.Helper()
	var n atomic.Int64
	ctx := context.Background()
	// RunParallel starts parallelism * GOMAXPROCS goroutines.
	b.SetParallelism(max(1, (Clients+procs()-1)/procs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(ctx, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// server returns a function that sends one POST /charges with a key
// through the wrapper over st, in process, and checks for 201. Safe for
// concurrent use.
func server(b *testing.B, st idemrt.Store) func(key string) error {
	h, err := idemrt.Wrap(idemrt.Options{Store: st}, policy(false, time.Minute), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(httpBody)
	}))
	if err != nil {
		b.Fatal(err)
	}
	clients := sync.Pool{New: func() any { return newClient(h) }}
	return func(key string) error {
		c := clients.Get().(*client)
		defer clients.Put(c)
		return c.do(key)
	}
}

// client sends requests to h, reusing one request and one response writer,
// so that what the benchmarks measure is the wrapper and the store, not
// net/http's constructors and test helpers (http.NewRequest parses the URL
// each time; httptest.ResponseRecorder copies the header map on every
// WriteHeader). A server pays for its own request parsing either way.
type client struct {
	h      http.Handler
	r      *http.Request
	body   requestBody
	keyVal [1]string
	w      DiscardWriter
}

func newClient(h http.Handler) *client {
	r, err := http.NewRequest(http.MethodPost, "http://api.test/charges", nil)
	if err != nil {
		panic(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(RequestJSON))
	return &client{h: h, r: r}
}

func (c *client) do(key string) error {
	c.body.Reset(RequestJSON)
	c.r.Body = &c.body
	c.keyVal[0] = key
	c.r.Header["Idempotency-Key"] = c.keyVal[:]
	c.w.Reset()
	c.h.ServeHTTP(&c.w, c.r)
	if c.w.Code != http.StatusCreated {
		return fmt.Errorf("status %d: %s", c.w.Code, c.w.head)
	}
	return nil
}

// requestBody is a request body that can be read again after Reset.
type requestBody struct{ strings.Reader }

func (*requestBody) Close() error { return nil }

// DiscardWriter is an http.ResponseWriter that keeps the status and the
// first bytes of the body, for error messages, and can be reused after
// Reset. Its zero value is ready to use.
type DiscardWriter struct {
	header http.Header
	Code   int
	head   []byte
}

// Reset forgets the last response.
func (w *DiscardWriter) Reset() {
	clear(w.header)
	w.Code, w.head = 0, w.head[:0]
}

func (w *DiscardWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *DiscardWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

func (w *DiscardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.head = append(w.head, p[:min(len(p), 512-len(w.head))]...)
	return len(p), nil
}

// workload is what the store benchmarks run, each as a function of the
// call's sequence number: the plain INSERT and primary-key SELECT of the
// baseline, and new keys and replays through the wrapper over a store.
type workload struct {
	insert, newKey, sel, replay func(ctx context.Context, i int64) error
	// replayKey is the key of the i-th replay (one of replayKeys, all
	// completed by newWorkload).
	replayKey func(i int64) string
}

// replayKeys is how many completed keys the replays cycle through.
const replayKeys = 1000

// newWorkload completes the replay keys through the wrapper over st.
func newWorkload(b *testing.B, st idemrt.Store, base Baseline) *workload {
	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	serve := server(b, st)
	w := &workload{replayKey: func(i int64) string { return fmt.Sprintf("%s-replay-%d", run, i%replayKeys) }}
	for i := range int64(replayKeys) {
		if err := serve(w.replayKey(i)); err != nil {
			b.Fatal(err)
		}
	}
	w.insert = func(ctx context.Context, _ int64) error { return base.Insert(ctx, NewKey()) }
	w.newKey = func(context.Context, int64) error { return serve(NewKey()) }
	w.sel = func(ctx context.Context, i int64) error {
		return base.Select(ctx, base.Preloaded(int(i%int64(base.Rows))))
	}
	w.replay = func(_ context.Context, i int64) error { return serve(w.replayKey(i)) }
	return w
}

// Bench runs the wrapper over st for new keys and for replays, next to
// the plain INSERT and primary-key SELECT of base, and the wrapper's own
// cost (replays from the in-memory store).
func Bench(b *testing.B, st idemrt.Store, base Baseline) {
	w := newWorkload(b, st, base)
	b.Run("PlainInsert", func(b *testing.B) { parallel(b, w.insert) })
	b.Run("WrapperNewKey", func(b *testing.B) { parallel(b, w.newKey) })
	b.Run("PrimaryKeySelect", func(b *testing.B) { parallel(b, w.sel) })
	b.Run("WrapperReplay", func(b *testing.B) { parallel(b, w.replay) })
	b.Run("StoreReplay", func(b *testing.B) {
		// The store alone: Claim of a completed key, no wrapper.
		parallel(b, func(ctx context.Context, i int64) error {
			res, err := st.Claim(ctx, idemrt.ClaimRequest{
				RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: w.replayKey(i)},
				Lease:     time.Minute, TTL: time.Hour,
			})
			if err == nil && res.State != idemrt.Completed {
				err = fmt.Errorf("claim of a completed key: %v", res.State)
			}
			return err
		})
	})
	b.Run("WrapperReplayMemoryStore", func(b *testing.B) {
		parallel(b, newWorkload(b, idemrt.NewMemoryStore(), base).replay)
	})
}

func procs() int { return runtime.GOMAXPROCS(0) }

// phase runs fn from Clients goroutines for d and returns how many calls
// completed.
func phase(b *testing.B, d time.Duration, fn func(ctx context.Context, i int64) error) int64 {
	var n, done atomic.Int64
	ctx := context.Background()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := fn(ctx, n.Add(1)); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return done.Load()
}

// benchCase is one side of a ratio: calls of fn (given each call's
// sequence number) from Clients goroutines; n and rounds count the calls
// that completed, in all and in each round.
type benchCase struct {
	name   string
	fn     func(ctx context.Context, i int64) error
	n      int64
	rounds []int64
}

// interleave runs cases in turn, 250 ms each, 8 rounds per b.N, so that a
// change of load on a shared machine hits both sides of a ratio alike. It
// reports each case's calls per second (name/s) and, for each ratio {num,
// den}, num/den over the whole run and its median over the rounds
// (med-num/den): a load burst that hits one slice moves the median least.
//
// IDEMGEN_BENCH_CASES, when set, is a comma-separated list of the case
// names to run; the others are left out, with the ratios that need them.
// It returns the names of the cases it ran.
func interleave(b *testing.B, cases []*benchCase, ratios [][2]string) []string {
	cases, ratios = selectCases(b, cases, ratios, os.Getenv("IDEMGEN_BENCH_CASES"))
	if len(cases) == 0 {
		b.Fatal("IDEMGEN_BENCH_CASES selects no case")
	}
	const slice = 250 * time.Millisecond
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N * 8 {
		for _, c := range cases {
			n := phase(b, slice, c.fn)
			c.n += n
			c.rounds = append(c.rounds, n)
		}
		elapsed += slice
	}
	b.StopTimer()
	s := elapsed.Seconds()
	byName := map[string]*benchCase{}
	for _, c := range cases {
		byName[c.name] = c
		b.ReportMetric(float64(c.n)/s, c.name+"/s")
	}
	for _, r := range ratios {
		num, den := byName[r[0]], byName[r[1]]
		b.ReportMetric(float64(num.n)/float64(max(den.n, 1)), r[0]+"/"+r[1])
		per := make([]float64, len(num.rounds))
		for i := range per {
			per[i] = float64(num.rounds[i]) / float64(max(den.rounds[i], 1))
		}
		slices.Sort(per)
		b.ReportMetric(per[len(per)/2], "med-"+r[0]+"/"+r[1])
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}

// selectCases keeps the cases named in the comma-separated list only (all
// of them when only is empty), and the ratios both of whose sides are kept.
// A name that is no case fails the benchmark: a typo would otherwise drop
// a case and its ratios without a word.
func selectCases(b *testing.B, cases []*benchCase, ratios [][2]string, only string) ([]*benchCase, [][2]string) {
	if strings.TrimSpace(only) == "" {
		return cases, ratios
	}
	keep := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			keep[name] = true
		}
	}
	var cs []*benchCase
	for _, c := range cases {
		if keep[c.name] {
			cs = append(cs, c)
			delete(keep, c.name)
		}
	}
	for name := range keep {
		b.Fatalf("IDEMGEN_BENCH_CASES names %q, which is not a case of this benchmark", name)
	}
	kept := map[string]bool{}
	for _, c := range cs {
		kept[c.name] = true
	}
	var rs [][2]string
	for _, r := range ratios {
		if kept[r[0]] && kept[r[1]] {
			rs = append(rs, r)
		}
	}
	return cs, rs
}

// Ratios measures the two comparisons of the targets with their sides
// interleaved (see interleave): plain INSERT, new keys through the
// wrapper, primary-key SELECT and replays through the wrapper, 16 clients
// each. It reports requests per second of each side and the ratios
// newkey/insert and replay/select (targets: 0.45 and 0.85).
func Ratios(b *testing.B, st idemrt.Store, base Baseline) {
	w := newWorkload(b, st, base)
	interleave(b, []*benchCase{
		{name: "insert", fn: w.insert},
		{name: "newkey", fn: w.newKey},
		{name: "select", fn: w.sel},
		{name: "replay", fn: w.replay},
	}, [][2]string{{"newkey", "insert"}, {"replay", "select"}})
}

// CompletedKeys claims and completes n keys of scope createCharge on st
// ("pre-0" to "pre-<n-1>", one principal and fingerprint), each with a 201
// and body, for the benchmarks of a replay's read, and returns their claim
// requests: a replay of one is st.Claim of it again.
func CompletedKeys(tb testing.TB, ctx context.Context, st idemrt.Store, n int, body []byte) []idemrt.ClaimRequest {
	tb.Helper()
	reqs := make([]idemrt.ClaimRequest, n)
	for i := range reqs {
		req := idemrt.ClaimRequest{RecordKey: idemrt.RecordKey{Scope: "createCharge", Key: fmt.Sprintf("pre-%d", i)}, Lease: time.Minute, TTL: time.Hour}
		req.PrincipalHash[0], req.Fingerprint[0] = 1, 2
		res, err := st.Claim(ctx, req)
		if err != nil || res.State != idemrt.Acquired {
			tb.Fatal(res, err)
		}
		if err := st.Complete(ctx, idemrt.Completion{RecordKey: req.RecordKey, Epoch: res.Epoch, TTL: time.Hour, Response: &idemrt.SavedResponse{
			Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: body,
		}}); err != nil {
			tb.Fatal(err)
		}
		reqs[i] = req
	}
	return reqs
}
