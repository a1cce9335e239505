package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Backend is one key store under test with the handler-side effects the
// fault tests observe: rows in a table "effects (id, worker)" of the same
// database, written in the request's transaction in transactional mode.
type Backend struct {
	// Store is a TxStore for the SQL stores; the Redis store (no
	// transactional mode) runs only the tests that do not need one.
	Store idemrt.Store
	// Effect writes one effect row for id by worker: through the request's
	// transaction (the generated typed TxFromContext) when ctx carries one,
	// else on its own.
	Effect func(ctx context.Context, id, worker string) error
	// Effects counts the committed effect rows of id.
	Effects func(ctx context.Context, id string) (int, error)
	// Deliver processes message id for consumer in a new transaction with
	// the generated MarkProcessed: when first, it writes an effect row
	// (worker "consumer") in the same transaction; then it waits hold and
	// commits, or rolls back when rollback is set.
	Deliver func(ctx context.Context, consumer, id string, hold time.Duration, rollback bool) (first bool, err error)
	// Records counts the rows of the key table.
	Records func(ctx context.Context) (int, error)
	// Hold locks up to n key records, oldest sweep time first, skipping
	// locked ones, in a transaction of its own, as a sweeper's batch does,
	// until release is called. Nil where the database has one writer
	// (SQLite).
	Hold func(ctx context.Context, n int) (release func(), err error)
	// DuplicateWaits is set when a duplicate of a transactional attempt
	// waits for the attempt's transaction to end (SQLite: its single write
	// lock) instead of being told at once that the key is in progress.
	DuplicateWaits bool
}

// Lease is the lease of the fault tests' policy: long enough for a
// database round trip under -race, short enough to wait out.
const Lease = 1500 * time.Millisecond

// Policy is the policy of the fault tests' operation: POST /charges with
// the key in Idempotency-Key, anonymous.
func Policy(transactional bool) *idemrt.Policy {
	return policy(transactional, Lease)
}

func policy(transactional bool, lease time.Duration) *idemrt.Policy {
	return &idemrt.Policy{
		OperationID:   "createCharge",
		Method:        http.MethodPost,
		Route:         "/charges",
		Principal:     idemrt.PrincipalAnonymous,
		Lease:         lease,
		TTL:           time.Hour,
		Transactional: transactional,
	}
}

// Handler is the fault tests' handler: it counts its runs, writes an
// effect row, calls hook (if any), and answers 201 with the key and the
// worker's name. A failing effect answers 500.
func Handler(b *Backend, worker string, runs *atomic.Int64, hook func(*http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		id := r.Header.Get("Idempotency-Key")
		if err := b.Effect(r.Context(), id, worker); err != nil {
			http.Error(w, "effect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if hook != nil {
			hook(r)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"worker":%q}`, id, worker)
	})
}

// Wrap protects h with Policy(transactional) over st.
func Wrap(t testing.TB, st idemrt.Store, transactional bool, h http.Handler, hooks idemrt.Hooks) http.Handler {
	t.Helper()
	wrapped, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: hooks}, Policy(transactional), h)
	if err != nil {
		t.Fatal(err)
	}
	return wrapped
}

// Do sends one POST /charges with key through h, in process.
func Do(h http.Handler, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// DoRetrying is Do as a client that honours the contract's 503 sends it:
// a 503 means nothing ran and the store could not decide in time (under a
// write storm on a loaded machine SQLite's write lock can stay taken for
// longer than the store bound), so the same request is sent again after a
// short pause, until another answer comes or the deadline passes. It
// returns the last answer and how many 503s came before it.
func DoRetrying(h http.Handler, key string, timeout time.Duration) (*httptest.ResponseRecorder, int) {
	// A 503 without Retry-After is not the contract's: it is not retried.
	return resend(h, key, timeout, func(w *httptest.ResponseRecorder) bool {
		return w.Code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") != ""
	})
}

// resend sends key through h, pausing 50-200 ms between sends, for as long
// as again says so of the answer and timeout has not passed. It returns
// the last answer and how many answers came before it.
func resend(h http.Handler, key string, timeout time.Duration, again func(*httptest.ResponseRecorder) bool) (*httptest.ResponseRecorder, int) {
	deadline := time.Now().Add(timeout)
	for before := 0; ; before++ {
		w := Do(h, key)
		if !again(w) || time.Now().After(deadline) {
			return w, before
		}
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
}

// stormDeadline bounds how long a storm request keeps retrying 503s.
const stormDeadline = 90 * time.Second

// UniqueKey returns a key unique to the test run.
func UniqueKey(t testing.TB, name string) string {
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

func effects(t testing.TB, b *Backend, id string) int {
	t.Helper()
	n, err := b.Effects(context.Background(), id)
	if err != nil {
		t.Fatalf("counting effects: %v", err)
	}
	return n
}

func wantStatus(t testing.TB, w *httptest.ResponseRecorder, status int, what string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, w.Code, status, w.Body)
	}
}

func wantReplay(t testing.TB, w *httptest.ResponseRecorder, worker string, what string) {
	t.Helper()
	wantStatus(t, w, http.StatusCreated, what)
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%s: not a replay (headers %v)", what, w.Header())
	}
	if !strings.Contains(w.Body.String(), fmt.Sprintf(`"worker":%q`, worker)) {
		t.Fatalf("%s: replayed body %s, want worker %q's", what, w.Body, worker)
	}
}

// retryUntil sends key through h until the status is not 409 (the lease
// of an earlier attempt is running) nor 503, or timeout.
func retryUntil(t testing.TB, h http.Handler, key string, timeout time.Duration) *httptest.ResponseRecorder {
	t.Helper()
	w, _ := resend(h, key, timeout, func(w *httptest.ResponseRecorder) bool {
		return w.Code == http.StatusConflict || w.Code == http.StatusServiceUnavailable
	})
	return w
}

// StormLease is the lease of the storm tests: the contract's default. The
// storms test simultaneous first requests, not lease expiry; under a
// 200-way write storm SQLite's busy handler can hold a completion back for
// seconds (the slowest request is logged), longer than the short Lease.
const StormLease = 60 * time.Second

// Storm sends the same new key from n goroutines at once, goroutine i
// through stores[i%len(stores)] (separate pools, so separate connections),
// and checks that the handler ran once, that every other request got 409
// or the replay, and that one effect row exists.
func Storm(t *testing.T, b *Backend, stores []idemrt.Store, n int) {
	storm(t, b, stores, n, false, 0)
}

// StormTransactional is Storm on a transactional operation, answered at
// once (409) and, with wait, in wait mode, where every duplicate must get
// the replay.
func StormTransactional(t *testing.T, b *Backend, stores []idemrt.Store, n int) {
	t.Run("NoWait", func(t *testing.T) { storm(t, b, stores, n, true, 0) })
	t.Run("Wait", func(t *testing.T) { storm(t, b, stores, n, true, 10*time.Second) })
}

func storm(t *testing.T, b *Backend, stores []idemrt.Store, n int, transactional bool, wait time.Duration) {
	key := UniqueKey(t, "storm")
	var runs atomic.Int64
	var storeErrs sync.Map
	hooks := idemrt.Hooks{StoreError: func(_ context.Context, e idemrt.Event) { storeErrs.Store(e.Err.Error(), true) }}
	handlers := make([]http.Handler, len(stores))
	for i, st := range stores {
		p := policy(transactional, StormLease)
		p.Wait = wait
		h, err := idemrt.Wrap(idemrt.Options{Store: st, Hooks: hooks}, p, Handler(b, "storm", &runs, func(*http.Request) { time.Sleep(50 * time.Millisecond) }))
		if err != nil {
			t.Fatal(err)
		}
		handlers[i] = h
	}
	start := make(chan struct{})
	codes := make([]int, n)
	replays := make([]bool, n)
	took := make([]time.Duration, n)
	var unavailable atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			w, n503 := DoRetrying(handlers[i%len(handlers)], key, stormDeadline)
			unavailable.Add(int64(n503))
			took[i] = time.Since(t0)
			codes[i] = w.Code
			replays[i] = w.Header().Get("Idempotent-Replayed") == "true"
		}()
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	firsts := 0
	for i, c := range codes {
		counts[c]++
		if c == http.StatusCreated && !replays[i] {
			firsts++
		}
	}
	t.Logf("%d requests: statuses %v, slowest %v, %d answers of 503 retried", n, counts, slices.Max(took).Round(time.Millisecond), unavailable.Load())
	// A store error answers 503 (nothing ran), which the requests above
	// retried; one that was not followed by a 503 broke something else.
	storeErrs.Range(func(k, _ any) bool {
		if unavailable.Load() == 0 {
			t.Errorf("store error: %v", k)
		} else {
			t.Logf("store error (answered 503, retried): %v", k)
		}
		return true
	})
	if got := runs.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
	if firsts != 1 {
		t.Errorf("%d first (non-replayed) 201s, want 1", firsts)
	}
	if counts[http.StatusCreated]+counts[http.StatusConflict] != n {
		t.Errorf("statuses %v: want only 201 and 409", counts)
	}
	if wait > 0 && counts[http.StatusCreated] != n {
		t.Errorf("statuses %v in wait mode: want every request 201", counts)
	}
	if got := effects(t, b, key); got != 1 {
		t.Errorf("%d effect rows, want 1", got)
	}
	wantReplay(t, Do(handlers[0], key), "storm", "after the storm")
}

// Transactional checks transactional mode: the handler's write becomes
// visible only with the completion, a failing handler's write is rolled back
// and its key released, and a replay does not write again.
func Transactional(t *testing.T, b *Backend) {
	t.Run("VisibleOnlyWithCompletion", func(t *testing.T) {
		key := UniqueKey(t, "tx")
		var runs atomic.Int64
		inHandler, release := make(chan struct{}), make(chan struct{})
		h := Wrap(t, b.Store, true, Handler(b, "w1", &runs, func(*http.Request) {
			close(inHandler)
			<-release
		}), idemrt.Hooks{})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- Do(h, key) }()
		<-inHandler
		if got := effects(t, b, key); got != 0 {
			t.Errorf("handler's uncommitted write is visible: %d rows", got)
		}
		if w := Do(h, key); w.Code != http.StatusConflict {
			t.Errorf("duplicate while in progress: %d, want 409", w.Code)
		}
		close(release)
		wantStatus(t, <-done, http.StatusCreated, "first request")
		if got := effects(t, b, key); got != 1 {
			t.Errorf("%d effect rows after completion, want 1", got)
		}
		wantReplay(t, Do(h, key), "w1", "retry")
		if got := effects(t, b, key); got != 1 || runs.Load() != 1 {
			t.Errorf("after the replay: %d effect rows, %d runs; want 1, 1", got, runs.Load())
		}
	})
	t.Run("HandlerFailureRollsBack", func(t *testing.T) {
		key := UniqueKey(t, "txfail")
		var runs atomic.Int64
		fail := true
		h := Wrap(t, b.Store, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			if err := b.Effect(r.Context(), key, "w1"); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if fail {
				http.Error(w, "dependency down", http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q,"worker":"w1"}`, key)
		}), idemrt.Hooks{})
		wantStatus(t, Do(h, key), http.StatusBadGateway, "failing attempt")
		if got := effects(t, b, key); got != 0 {
			t.Fatalf("failed attempt's write is visible: %d rows", got)
		}
		fail = false
		wantStatus(t, Do(h, key), http.StatusCreated, "retry after the failure")
		if got := effects(t, b, key); got != 1 || runs.Load() != 2 {
			t.Errorf("%d effect rows, %d runs; want 1, 2", got, runs.Load())
		}
		wantReplay(t, Do(h, key), "w1", "second retry")
	})
	t.Run("PanicRollsBack", func(t *testing.T) {
		key := UniqueKey(t, "txpanic")
		h := Wrap(t, b.Store, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := b.Effect(r.Context(), key, "w1"); err != nil {
				t.Error(err)
			}
			panic("handler bug")
		}), idemrt.Hooks{})
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not go on")
				}
			}()
			Do(h, key)
		}()
		if got := effects(t, b, key); got != 0 {
			t.Errorf("panicking attempt's write is visible: %d rows", got)
		}
		var runs atomic.Int64
		ok := Wrap(t, b.Store, true, Handler(b, "w2", &runs, nil), idemrt.Hooks{})
		wantStatus(t, Do(ok, key), http.StatusCreated, "retry after the panic")
		if got := effects(t, b, key); got != 1 {
			t.Errorf("%d effect rows, want 1", got)
		}
	})
}

// Consumer delivers one message from n goroutines at once (each its own
// transaction, holding it a little so that they overlap) and checks that
// exactly one processed it, then that a delivery whose transaction rolls
// back leaves the message unprocessed.
func Consumer(t *testing.T, b *Backend, n int) {
	ctx := context.Background()
	msg := UniqueKey(t, "msg")
	start := make(chan struct{})
	var firsts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			first, err := b.Deliver(ctx, "billing", msg, 20*time.Millisecond, false)
			if err != nil {
				errs <- err
				return
			}
			if first {
				firsts.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("delivery: %v", err)
	}
	if firsts.Load() != 1 {
		t.Errorf("%d deliveries processed the message, want 1", firsts.Load())
	}
	if got := effects(t, b, msg); got != 1 {
		t.Errorf("%d effect rows, want 1", got)
	}
	// Another consumer has its own record of the same message id.
	if first, err := b.Deliver(ctx, "shipping", msg, 0, false); err != nil || !first {
		t.Errorf("other consumer: first = %v, err = %v; want true, nil", first, err)
	}
	// A delivery that rolls back does not count.
	msg2 := UniqueKey(t, "msg2")
	if first, err := b.Deliver(ctx, "billing", msg2, 0, true); err != nil || !first {
		t.Fatalf("rolled-back delivery: first = %v, err = %v", first, err)
	}
	if first, err := b.Deliver(ctx, "billing", msg2, 0, false); err != nil || !first {
		t.Errorf("redelivery after a rollback: first = %v, err = %v; want true, nil", first, err)
	}
	if first, err := b.Deliver(ctx, "billing", msg2, 0, false); err != nil || first {
		t.Errorf("third delivery: first = %v, err = %v; want false, nil", first, err)
	}
	if got := effects(t, b, msg2); got != 1 {
		t.Errorf("%d effect rows for the redelivered message, want 1", got)
	}
}

// Sweeper runs idemrt.RunSweeper on the store and checks that it deletes
// expired records and stops with its context.
func Sweeper(t *testing.T, b *Backend) {
	ctx := context.Background()
	before, err := b.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		k := idemrt.RecordKey{Scope: "sweeper", Key: fmt.Sprintf("%s-%d", UniqueKey(t, "sw"), i)}
		res, err := b.Store.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: 100 * time.Millisecond, TTL: 100 * time.Millisecond})
		if err != nil || res.State != idemrt.Acquired {
			t.Fatalf("claim: %+v, %v", res, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- idemrt.RunSweeper(sctx, b.Store, 20*time.Millisecond, 7) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := b.Records(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweeper left %d records, want at most %d", n, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunSweeper did not stop with its context")
	}
}

// ChildEnv names the environment of a helper process.
const (
	ChildKeyEnv = "IDEMGEN_CHILD_KEY"
)

// ChildMain runs in a helper process: it serves one request for the key
// in $IDEMGEN_CHILD_KEY through the fault tests' policy (transactional for
// mode "tx-hang", not for "hang"). The handler writes its effect, prints
// IN_HANDLER and waits for a line on stdin (or to be killed); then the
// process prints STATUS <code> and FENCED if its completion was fenced.
func ChildMain(mode string, b *Backend) int {
	key := os.Getenv(ChildKeyEnv)
	var fenced atomic.Bool
	hooks := idemrt.Hooks{Fenced: func(context.Context, idemrt.Event) { fenced.Store(true) }}
	stdin := bufio.NewReader(os.Stdin)
	var runs atomic.Int64
	p := Policy(mode == "tx-hang")
	if _, ok := b.Store.(idemrt.ClaimTxStore); ok && mode == "tx-hang" {
		// A lease far longer than CrashTransactional waits: the retry
		// after the kill must not depend on it.
		p.Lease = StormLease
	}
	h, err := idemrt.Wrap(idemrt.Options{Store: b.Store, Hooks: hooks}, p, Handler(b, "child", &runs, func(*http.Request) {
		fmt.Println("IN_HANDLER")
		stdin.ReadString('\n')
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := Do(h, key)
	fmt.Printf("STATUS %d\n", w.Code)
	if fenced.Load() {
		fmt.Println("FENCED")
	}
	return 0
}

// Child is a running helper process.
type Child struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	lines    chan string
	readDone chan struct{}
	waitOnce sync.Once
}

// Start starts cmd (the test binary re-run as a helper process).
func Start(t *testing.T, cmd *exec.Cmd) *Child {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, stdin: in, lines: make(chan string, 64), readDone: make(chan struct{})}
	go func() {
		defer close(c.readDone)
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { c.kill(); c.wait() })
	return c
}

// kill sends SIGKILL (kill -9).
func (c *Child) kill() error { return c.cmd.Process.Kill() }

// wait waits for the child's output to end and for the child to exit.
func (c *Child) wait() {
	c.waitOnce.Do(func() {
		<-c.readDone
		c.cmd.Wait()
	})
}

// Expect waits for the child to print line.
func (c *Child) Expect(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case got, ok := <-c.lines:
			if !ok {
				t.Fatalf("helper process ended before printing %q", line)
			}
			if got == line {
				return
			}
		case <-timeout:
			t.Fatalf("helper process did not print %q", line)
		}
	}
}

// Lines returns the rest of the child's output, after it exits.
func (c *Child) Lines() []string {
	var out []string
	for l := range c.lines {
		out = append(out, l)
	}
	return out
}

// CrashTransactional kills -9 a helper process in the middle of a
// transactional handler that has written its effect, and checks that the
// effect is rolled back, that the key stays in progress until the lease
// ends, and that the retry then runs once.
func CrashTransactional(t *testing.T, b *Backend, start func(t *testing.T, mode, key string) *Child) {
	key := UniqueKey(t, "crash")
	child := start(t, "tx-hang", key)
	child.Expect(t, "IN_HANDLER")
	var runs atomic.Int64
	h := Wrap(t, b.Store, true, Handler(b, "parent", &runs, nil), idemrt.Hooks{})
	if got := effects(t, b, key); got != 0 {
		t.Errorf("the child's uncommitted write is visible: %d rows", got)
	}
	if _, ok := b.Store.(idemrt.ClaimTxStore); ok && !b.DuplicateWaits {
		// The child's record is not committed: a duplicate learns of it
		// through the database's locking, at once.
		wantStatus(t, Do(h, key), http.StatusConflict, "duplicate while the child is in its handler")
	}
	if err := child.kill(); err != nil {
		t.Fatal(err)
	}
	child.wait()
	killedAt := time.Now()
	if got := effects(t, b, key); got != 0 {
		t.Fatalf("the killed child's write is visible: %d rows", got)
	}
	if _, ok := b.Store.(idemrt.ClaimTxStore); ok {
		// The claim was in the child's transaction, which died with it:
		// no lease to wait out (the child's is a minute). The retry runs
		// as soon as the database has seen the connection drop.
		w := retryUntil(t, h, key, 10*time.Second)
		wantStatus(t, w, http.StatusCreated, "retry right after the kill")
		t.Logf("retry ran %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	} else {
		if w := Do(h, key); w.Code != http.StatusConflict {
			t.Errorf("retry during the dead child's lease: %d, want 409", w.Code)
		}
		w := retryUntil(t, h, key, 10*time.Second)
		wantStatus(t, w, http.StatusCreated, "retry after the lease")
		t.Logf("key taken over %v after the kill", time.Since(killedAt).Round(10*time.Millisecond))
	}
	if runs.Load() != 1 || effects(t, b, key) != 1 {
		t.Errorf("after the takeover: %d runs, %d effect rows; want 1, 1", runs.Load(), effects(t, b, key))
	}
	wantReplay(t, Do(h, key), "parent", "second retry")
	if got := effects(t, b, key); got != 1 {
		t.Errorf("%d effect rows, want 1", got)
	}
}

// StaleWorker runs a non-transactional handler in a helper process and
// stalls it past its lease: the key is taken over by a new attempt, and the
// stale worker's late completion is fenced (its own client still gets its
// response) while the new owner's result is what replays.
func StaleWorker(t *testing.T, b *Backend, start func(t *testing.T, mode, key string) *Child) {
	key := UniqueKey(t, "stale")
	child := start(t, "hang", key)
	child.Expect(t, "IN_HANDLER")
	var runs atomic.Int64
	h := Wrap(t, b.Store, false, Handler(b, "parent", &runs, nil), idemrt.Hooks{})
	if w := Do(h, key); w.Code != http.StatusConflict {
		t.Errorf("duplicate during the child's lease: %d, want 409", w.Code)
	}
	w := retryUntil(t, h, key, 10*time.Second)
	wantStatus(t, w, http.StatusCreated, "takeover after the lease")
	if runs.Load() != 1 {
		t.Errorf("parent ran %d times, want 1", runs.Load())
	}
	// Without transactional mode the stale worker's effect stays: that is
	// why leases must outlast handlers (CONTRACT §4).
	if got := effects(t, b, key); got != 2 {
		t.Errorf("%d effect rows, want 2 (the stale worker's and the new owner's)", got)
	}
	fmt.Fprintln(child.stdin, "go")
	child.wait()
	lines := strings.Join(child.Lines(), "\n")
	if !strings.Contains(lines, "STATUS 201") {
		t.Errorf("stale worker's client did not get its response: %q", lines)
	}
	if !strings.Contains(lines, "FENCED") {
		t.Errorf("stale worker's completion was not fenced: %q", lines)
	}
	wantReplay(t, Do(h, key), "parent", "after the stale completion")
}

// StallTimeout is the StoreTimeout of StoreStall: well under Lease.
const StallTimeout = 300 * time.Millisecond

// StoreStall checks Options.StoreTimeout against a server that stops
// answering (the proxy holds every byte, connections stay open): requests
// get 503 with Retry-After within the bound instead of hanging, and the
// handler does not run; a transactional attempt whose completion stalls
// after the handler wrote gets 503 and nothing of it is saved, even once
// the held bytes reach the server; once the proxy resumes, a retry with
// each key runs the handler exactly once.
func StoreStall(t *testing.T, b, direct *Backend, proxy *Proxy) {
	wrap := func(transactional bool, h http.Handler) http.Handler {
		w, err := idemrt.Wrap(idemrt.Options{Store: b.Store, StoreTimeout: StallTimeout}, Policy(transactional), h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	outage(t, b, direct, wrap, "stall", 2, proxy.Stall, proxy.Resume)
}

// StoreCut checks fail-closed behaviour when the store disappears, with b
// connected through proxy and direct connected straight to the server:
// requests made while the proxy is cut get 503 and the handler does not
// run; a transactional attempt cut after its handler wrote gets 503 and
// nothing of it is saved; once the proxy is back, retries with the same
// keys succeed and each handler ran exactly once. A non-transactional
// attempt cut before its completion stays in progress until its lease ends.
func StoreCut(t *testing.T, b, direct *Backend, proxy *Proxy) {
	wrap := func(transactional bool, h http.Handler) http.Handler {
		return Wrap(t, b.Store, transactional, h, idemrt.Hooks{})
	}
	outage(t, b, direct, wrap, "cut", 3, proxy.Cut, proxy.Restore)

	// Not transactional: the store goes away after the handler's own write,
	// before the completion. The client still gets the handler's response;
	// the record stays in progress (not half-completed) until its lease
	// ends, and then a retry runs the handler again (CONTRACT §4; this is
	// what transactional mode is for).
	key := UniqueKey(t, "cut-plain")
	var plainRuns atomic.Int64
	cutOnce := true
	hp := Wrap(t, b.Store, false, Handler(b, "w3", &plainRuns, func(*http.Request) {
		if cutOnce {
			cutOnce = false
			proxy.Cut()
		}
	}), idemrt.Hooks{})
	wantStatus(t, Do(hp, key), http.StatusCreated, "attempt whose completion was cut")
	proxy.Restore()
	// 409, or 503 if the pool hands out a connection the cut broke.
	if w := Do(hp, key); (w.Code != http.StatusConflict && w.Code != http.StatusServiceUnavailable) || plainRuns.Load() != 1 {
		t.Errorf("retry during the lease after a failed completion: %d with %d runs, want 409 (or 503) and 1", w.Code, plainRuns.Load())
	}
	w := retryUntil(t, hp, key, 10*time.Second)
	wantStatus(t, w, http.StatusCreated, "retry after the lease")
	if w.Header().Get("Idempotent-Replayed") == "true" {
		t.Error("the cut attempt's result was saved")
	}
	wantReplay(t, Do(hp, key), "w3", "second retry")
	if plainRuns.Load() != 2 || effects(t, direct, key) != 2 {
		t.Errorf("%d runs, %d effect rows; want 2, 2 (the cut attempt's and the retry's)", plainRuns.Load(), effects(t, direct, key))
	}
}

// outage is what StoreStall and StoreCut share, with down and up taking
// the store away and bringing it back under the handlers wrap builds:
// nkeys requests while it is down get 503 store-unavailable (problem+json,
// Retry-After) and do not run the handler; once it is up, a retry with each
// key runs the handler once and then replays. A transactional attempt
// whose store goes down after its handler wrote gets 503, and nothing of it
// is saved (neither while the store is down nor once it is up); its retry
// runs the handler once more.
func outage(t *testing.T, b, direct *Backend, wrap func(transactional bool, h http.Handler) http.Handler, name string, nkeys int, down, up func()) {
	var runs atomic.Int64
	h := wrap(false, Handler(b, name+"1", &runs, nil))
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = UniqueKey(t, fmt.Sprintf("%s-%c", name, 'a'+i))
	}
	down()
	for _, k := range keys {
		w := Do(h, k)
		wantStatus(t, w, http.StatusServiceUnavailable, "request while the store is down ("+name+")")
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("503 content type %q, want application/problem+json", ct)
		}
		if !strings.Contains(w.Body.String(), idemrt.ProblemStoreUnavailable) || w.Header().Get("Retry-After") == "" {
			t.Errorf("503 body %s, Retry-After %q: want store-unavailable with Retry-After", w.Body, w.Header().Get("Retry-After"))
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("handler ran %d times without a claim", runs.Load())
	}
	up()
	for _, k := range keys {
		w := retryUntil(t, h, k, 10*time.Second)
		wantStatus(t, w, http.StatusCreated, "retry after the store came back ("+name+")")
		wantReplay(t, Do(h, k), name+"1", "second retry")
		if got := effects(t, direct, k); got != 1 {
			t.Errorf("%s: %d effect rows, want 1", k, got)
		}
	}
	if runs.Load() != int64(len(keys)) {
		t.Errorf("handler ran %d times for %d keys", runs.Load(), len(keys))
	}

	// Transactional: the store goes down after the handler wrote in the
	// transaction, before the completion commits.
	key := UniqueKey(t, name+"-tx")
	var txRuns atomic.Int64
	downOnce := true
	hx := wrap(true, Handler(b, name+"2", &txRuns, func(*http.Request) {
		if downOnce {
			downOnce = false
			down()
		}
	}))
	wantStatus(t, Do(hx, key), http.StatusServiceUnavailable, "transactional attempt whose store went down mid-flight ("+name+")")
	if got := effects(t, direct, key); got != 0 {
		t.Fatalf("the attempt's write is visible while the store is down: %d rows", got)
	}
	up()
	if got := effects(t, direct, key); got != 0 {
		t.Fatalf("the attempt's write is visible once the store is back: %d rows", got)
	}
	w := retryUntil(t, hx, key, 10*time.Second)
	wantStatus(t, w, http.StatusCreated, "retry after the store came back ("+name+")")
	wantReplay(t, Do(hx, key), name+"2", "second retry")
	if got := effects(t, direct, key); got != 1 {
		t.Errorf("%d effect rows, want 1", got)
	}
	if txRuns.Load() != 2 {
		t.Errorf("transactional handler ran %d times, want 2 (the attempt the store went down under, rolled back, and the retry)", txRuns.Load())
	}
}

// ChildStorm runs in a helper process: it prints READY, waits for a line
// on stdin, then sends the key in $IDEMGEN_CHILD_KEY from n goroutines,
// and prints RUNS <handler runs> and one CODE <status> per request.
func ChildStorm(b *Backend, n int) int {
	key := os.Getenv(ChildKeyEnv)
	var runs atomic.Int64
	h, err := idemrt.Wrap(idemrt.Options{Store: b.Store}, policy(false, StormLease), Handler(b, "storm", &runs, func(*http.Request) { time.Sleep(50 * time.Millisecond) }))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, _ := DoRetrying(h, key, stormDeadline)
			codes[i] = w.Code
		}()
	}
	wg.Wait()
	fmt.Printf("RUNS %d\n", runs.Load())
	for _, c := range codes {
		fmt.Printf("CODE %d\n", c)
	}
	return 0
}

// StormProcesses starts procs helper processes (ChildStorm), releases them
// together, and checks that the handler ran once across all of them.
func StormProcesses(t *testing.T, b *Backend, start func(t *testing.T, mode, key string) *Child, procs int) {
	key := UniqueKey(t, "pstorm")
	children := make([]*Child, procs)
	for i := range children {
		children[i] = start(t, "storm", key)
	}
	for _, c := range children {
		c.Expect(t, "READY")
	}
	for _, c := range children {
		fmt.Fprintln(c.stdin, "go")
	}
	runs := 0
	codes := map[string]int{}
	for _, c := range children {
		c.wait()
		for _, l := range c.Lines() {
			var n int
			if _, err := fmt.Sscanf(l, "RUNS %d", &n); err == nil {
				runs += n
			} else if strings.HasPrefix(l, "CODE ") {
				codes[strings.TrimPrefix(l, "CODE ")]++
			}
		}
	}
	t.Logf("%d processes: statuses %v", procs, codes)
	if runs != 1 {
		t.Errorf("handler ran %d times across %d processes, want 1", runs, procs)
	}
	if codes["201"]+codes["409"] == 0 || len(codes) > 2 {
		t.Errorf("statuses %v: want only 201 and 409", codes)
	}
	if got := effects(t, b, key); got != 1 {
		t.Errorf("%d effect rows, want 1", got)
	}
}

// LargeResponse saves and replays a response just over the contract's
// default max-response-bytes (1 MiB), with every byte value, and a
// multi-valued header with a value that is not UTF-8.
func LargeResponse(t *testing.T, st idemrt.Store) {
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "large", Key: UniqueKey(t, "large")}
	res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	body := make([]byte, 1<<20+4096)
	for i := range body {
		body[i] = byte(i * 7)
	}
	h := http.Header{"Link": {"<a>; rel=next", "<b>; rel=prev"}, "X-Raw": {"caf\xe9", ""}}
	if err := st.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: time.Hour, Response: &idemrt.SavedResponse{Status: 201, Header: h, Body: body}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	got, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
	if err != nil || got.State != idemrt.Completed || got.Response == nil {
		t.Fatalf("replay: %+v, %v", got, err)
	}
	if !bytes.Equal(got.Response.Body, body) {
		t.Errorf("replayed body differs (%d bytes, want %d)", len(got.Response.Body), len(body))
	}
	if !reflect.DeepEqual(got.Response.Header, h) {
		t.Errorf("replayed headers %q, want %q", got.Response.Header, h)
	}
}

// DatabaseClock claims a key on a with a 2 s lease and shows that the lease
// lives on the database's clock: serverLease (the stored lease_until minus
// the server's own now, read by the caller in its dialect) is about the
// lease, the second server b sees it in progress with at most the lease
// left, takes it over only once it has ended, and a's late completion is
// then fenced.
func DatabaseClock(t *testing.T, a, b idemrt.Store, serverLease func(ctx context.Context, key string) (time.Duration, error)) {
	t.Helper()
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "clock", Key: UniqueKey(t, "clock")}
	const lease = 2 * time.Second
	res, err := a.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: lease, TTL: time.Hour})
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	stored, err := serverLease(ctx, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	if stored <= lease-500*time.Millisecond || stored > lease {
		t.Errorf("stored lease ends %v after the server's now, want about %v", stored, lease)
	}
	got, err := b.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: lease, TTL: time.Hour})
	if err != nil || got.State != idemrt.InProgress {
		t.Fatalf("second server's claim: %+v, %v; want in progress", got, err)
	}
	if got.LeaseRemaining <= 0 || got.LeaseRemaining > lease {
		t.Errorf("second server sees %v of lease left, want (0, %v]", got.LeaseRemaining, lease)
	}
	time.Sleep(lease + 200*time.Millisecond)
	got, err = b.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: lease, TTL: time.Hour})
	if err != nil || got.State != idemrt.Acquired || !got.TakenOver || got.Epoch != res.Epoch+1 {
		t.Fatalf("takeover after the lease: %+v, %v", got, err)
	}
	if err := a.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: time.Hour}); err != idemrt.ErrFenced {
		t.Errorf("first server's late completion: %v, want ErrFenced", err)
	}
}
