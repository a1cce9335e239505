package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"
)

type engine struct {
	store   Store
	txStore TxStore
	// claimTx is set when the store claims inside the handler's
	// transaction (transactional mode in one commit).
	claimTx   ClaimTxStore
	principal func(*http.Request) (string, error)
	hooks     Hooks
	log       *slog.Logger
	// logRawKeys is Options.LogRawKeys: logs carry key instead of key_hash.
	logRawKeys bool
	// storeTimeout is Options.StoreTimeout (see bound).
	storeTimeout time.Duration
	// inProcess is set for the MemoryStore, whose calls take a mutex and
	// never wait on I/O: bounding them would only cost a timer per call.
	inProcess bool
	// storeID tells the store's records apart (see storeIdentity): two
	// engines with the same non-nil storeID claim the same records.
	storeID any
	// inflight holds the lease end (time.Time) of every one-commit attempt
	// (claimTx) of this middleware, by RecordKey, while it runs: a
	// duplicate that BeginClaim reports InProgress without a lease (the
	// record is not committed, so the store cannot see it) gets its
	// Retry-After from here when the attempt runs in this process.
	inflight sync.Map
	// ring seals saved responses (Options.Encryption; see seal.go), and
	// replayPlaintext lets it replay records saved in clear.
	ring            *KeyRing
	replayPlaintext bool
}

// leaseLeft fills in res.LeaseRemaining of an InProgress claim of rk that
// the store could not measure, from an attempt of this process.
func (e *engine) leaseLeft(rk RecordKey, res *ClaimResult) {
	if res.LeaseRemaining > 0 || e.claimTx == nil {
		return
	}
	if end, ok := e.inflight.Load(rk); ok {
		res.LeaseRemaining = max(time.Until(end.(time.Time)), 0)
	}
}

// bound is how long one store call of op may take: 0 for no bound.
func (e *engine) bound(op *operation) time.Duration {
	switch {
	case e.storeTimeout < 0 || e.inProcess:
		return 0
	case e.storeTimeout > 0:
		return e.storeTimeout
	}
	return min(DefaultStoreTimeout, op.lease/2)
}

// storeCtx bounds one store call of op: the call's context, and its bound
// (nil for an unbounded call) to release once the call returned.
func (e *engine) storeCtx(ctx context.Context, op *operation) (context.Context, *storeBound) {
	if d := e.bound(op); d > 0 {
		b := newStoreBound(ctx, d)
		return b, b
	}
	return ctx, nil
}

// beginTx opens op's transaction within the store bound. The bound covers
// BeginTx alone: the context the transaction is opened with (which
// database/sql watches for the transaction's whole life) ends at the
// returned txBound's release, to be called once the transaction has ended,
// or at the bound if BeginTx has not returned by then.
func (e *engine) beginTx(ctx context.Context, op *operation) (Tx, *txBound, error) {
	txCtx := newTxBound(ctx, e.bound(op), time.Time{})
	tx, err := e.txStore.BeginTx(txCtx)
	if err = e.begun(ctx, op, txCtx, tx, err); err != nil {
		txCtx.release()
		return nil, nil, err
	}
	return tx, txCtx, nil
}

// beginClaim claims req's key in a new transaction (ClaimTxStore) within
// the store bound. The transaction lives at most op's lease: its context
// ends then (a store on database/sql rolls it back), and the handler's
// context with it. The returned txBound is the transaction's context;
// release it once the transaction is over. tx is nil unless the result is
// Acquired (and the txBound then nil too).
func (e *engine) beginClaim(ctx context.Context, op *operation, req ClaimRequest) (Tx, ClaimResult, time.Time, *txBound, error) {
	deadline := time.Now().Add(op.lease)
	txCtx := newTxBound(ctx, e.bound(op), deadline)
	tx, res, err := e.claimTx.BeginClaim(txCtx, req)
	err = e.begun(ctx, op, txCtx, tx, err)
	if err == nil && (tx == nil) != (res.State != Acquired) {
		if tx != nil {
			e.rollback(ctx, op, tx)
		}
		err = errors.New("store's BeginClaim returned " + res.State.String() + " with a transaction that does not match it")
	}
	if err != nil || tx == nil {
		txCtx.release()
		return nil, res, deadline, nil, err
	}
	return tx, res, deadline, txCtx, nil
}

// begun ends the store bound of the call that opened tx with txCtx, which
// returned err. A transaction opened as the bound ended has an ended
// context and cannot be used: it is rolled back and the result is
// context.DeadlineExceeded. Without a transaction (an error, or a claim
// that found the key taken) the caller releases txCtx at once: its bound
// is left as it is.
func (e *engine) begun(ctx context.Context, op *operation, txCtx *txBound, tx Tx, err error) error {
	if tx == nil || err != nil {
		return err
	}
	if !txCtx.begun() {
		e.rollback(ctx, op, tx)
		return context.DeadlineExceeded
	}
	return nil
}

// rollback rolls tx back within the store bound.
func (e *engine) rollback(ctx context.Context, op *operation, tx Tx) {
	sctx, bound := e.storeCtx(bg(ctx), op)
	defer bound.release()
	_ = tx.Rollback(sctx)
}

// storeRetryAfter is the Retry-After (seconds) of 503 responses.
const storeRetryAfter = 1

// Wait mode polls the store with a backoff from waitFirstPoll doubling up
// to waitMaxPoll.
const (
	waitFirstPoll = 10 * time.Millisecond
	waitMaxPoll   = 250 * time.Millisecond
)

var errTooLarge = errors.New("request body too large")

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// readBody reads the whole body, up to max bytes, into a pooled buffer.
func readBody(r *http.Request, max int64) (*[]byte, error) {
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() { *bp = b }()
	if r.Body == nil || r.Body == http.NoBody {
		return bp, nil
	}
	// The buffer grows with the bytes that arrive, never to a declared
	// Content-Length before they do (a client's word costs no memory).
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return bp, errTooLarge
		}
		if err == io.EOF {
			return bp, nil
		}
		if err != nil {
			return bp, err
		}
	}
}

func putBody(bp *[]byte) {
	if cap(*bp) > 1<<20 {
		return
	}
	*bp = (*bp)[:0]
	bodyPool.Put(bp)
}

// bodyReader gives the handler the body that the engine read.
type bodyReader struct {
	b   []byte
	off int
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

func (b *bodyReader) Close() error { return nil }

func (e *engine) event(ctx context.Context, hook func(context.Context, Event), ev Event) {
	if hook != nil {
		hook(ctx, ev)
	}
}

func (e *engine) logAt(ctx context.Context, level slog.Level, msg string, op *operation, key string, attrs ...slog.Attr) {
	if e.log == nil || !e.log.Enabled(ctx, level) {
		return
	}
	k := slog.String("key_hash", KeyDigest(key))
	if e.logRawKeys {
		k = slog.String("key", key)
	}
	attrs = append(attrs, slog.String("operation", op.name), slog.String("scope", op.scope), k)
	e.log.LogAttrs(ctx, level, msg, attrs...)
}

// report calls hook with ev and logs msg at level, for op and ev.Key: the
// event and the log line that go together.
func (e *engine) report(ctx context.Context, hook func(context.Context, Event), ev Event, level slog.Level, msg string, op *operation, attrs ...slog.Attr) {
	e.event(ctx, hook, ev)
	e.logAt(ctx, level, msg, op, ev.Key, attrs...)
}

// refusal is a problem response (problem.go) that the engine writes instead
// of running the handler or replaying. The zero value refuses nothing.
type refusal struct {
	status     int
	typ        string
	detail     string
	retryAfter int      // seconds; 0 for no Retry-After
	challenges []string // WWW-Authenticate values (a 401)
}

// write writes the refusal to w.
func (f refusal) write(w http.ResponseWriter) {
	for _, c := range f.challenges {
		w.Header().Add("WWW-Authenticate", c)
	}
	writeProblem(w, f.status, f.typ, f.detail, f.retryAfter)
}

// claimInput is what preparation hands the claim: the claim request, and
// the body, which a record saved under an older fingerprint version is
// compared with (fingerprintDiffers) along with the fingerprint's inputs.
// Those inputs (fpInput) travel apart: escape analysis does not tell a
// struct's fields apart, and in one struct with the request and the body,
// which go to the heap, they would take the path parameters (on the
// router's stack) with them.
type claimInput struct {
	req  ClaimRequest
	body []byte
	// bp is body's pooled buffer, set once the body is read (also when it
	// is then refused); serve returns it when the request is done.
	bp *[]byte
}

// serve runs one request of a protected operation (CONTRACT §2-§4):
// preparation, then the claim, unless preparation refused the request or
// let it run unprotected. Every refusal of serve is written here.
func (e *engine) serve(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, params []string) {
	// The stages fill these in place: returned, each would be copied at
	// every level.
	fq := requestFpInput(r, op, params)
	var in claimInput
	ref, pass := e.prepare(r, op, &fq, &in)
	if in.bp != nil {
		defer putBody(in.bp)
	}
	switch {
	case pass:
		passThrough(w, r, next, in.bp)
		return
	case ref.status == 0 && (op.wait > 0 || op.transactional) && mountedTwice(w, e, &in):
		// Asked before the claim when op waits, or claims in a
		// transaction: the claim would wait on the outer attempt, which
		// waits on this one, until the wait ends, or on its uncommitted
		// record (MySQL's row lock) until the store bound does.
		ref = mountedTwiceRefusal(op)
	case ref.status == 0:
		ref = e.claim(w, r, op, next, &in, &fq)
		if ref.typ == ProblemInProgress && mountedTwice(w, e, &in) {
			ref = mountedTwiceRefusal(op)
		}
	}
	if ref.status != 0 {
		ref.write(w)
	}
}

// mountedTwiceRefusal is the 500 of an operation whose middleware runs
// inside another one for the same key and store (see mountedTwice).
func mountedTwiceRefusal(op *operation) refusal {
	return refusal{status: http.StatusInternalServerError, typ: ProblemMountedTwice, detail: "the idempotency middleware of operation " +
		op.name + " runs inside another one for the same key and store (mounted twice: a Middleware or Wrap inside another); " +
		"the inner one finds the outer one's claim, and would answer 409 in-progress to every request; remove one of them"}
}

// mountedTwice reports whether w is (or wraps) the writer of an attempt
// that holds the claim in's request would make, on the same store: the
// middleware is mounted twice on this request's path. It is asked of a
// key found in progress, and before every claim of an operation that waits
// or is transactional (see serve): the other operations' requests that do
// not find their key in progress do not pay for it. When it
// is, the outer attempt is declined (DoNotSave): the refusal written
// through it is not the key's result, even under a save rule that takes
// 5xx, where it would otherwise be replayed for the whole ttl after the
// wiring is fixed.
func mountedTwice(w http.ResponseWriter, e *engine, in *claimInput) bool {
	for range maxUnwrap {
		switch x := w.(type) {
		case *captureWriter:
			if x.rk != in.req.RecordKey || e.storeID == nil || x.e.storeID != e.storeID {
				return false
			}
			x.decline()
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// storeIdentity is what engines compare to tell whether two stores claim
// the same records (mountedTwice), decided once, at start-up: the store's
// StoreIdentity when it has one (two values over one table of one
// database), else the store itself when it can be compared (a pointer: the
// MemoryStore), else nil (never the same).
func storeIdentity(s Store) any {
	if si, ok := s.(StoreIdentifier); ok {
		if id := si.StoreIdentity(); id != "" {
			return id
		}
	}
	if v := reflect.ValueOf(s); v.IsValid() && v.Comparable() {
		// Comparable as a value (reflect looks into interface fields):
		// comparing it with == cannot panic.
		return s
	}
	return nil
}

// prepare checks r and computes what claiming its key needs, before
// anything is claimed: it fills in the claim's input from r and the
// fingerprint's inputs fq, or returns the refusal to write instead; pass
// reports an optional key that is absent, for which the request runs
// unprotected.
func (e *engine) prepare(r *http.Request, op *operation, fq *fpInput, in *claimInput) (ref refusal, pass bool) {
	// 1. A key from a header or the query.
	rawKey, ref, pass := requestKey(r, op)
	if ref.status != 0 || pass {
		return ref, pass
	}

	// 2. The principal.
	ph, ref := e.principalHash(r, op)
	if ref.status != 0 {
		return ref, false
	}

	// 3. Key syntax.
	var key string
	if op.key == KeyFromHeader || op.key == KeyFromQuery {
		k, err := parseKey(rawKey)
		if err != nil {
			return refusal{status: http.StatusBadRequest, typ: ProblemKeyMalformed, detail: err.Error() + "; a key is 1 to 255 visible ASCII characters"}, false
		}
		key = k
	}

	// 4. The body, whole, before anything is claimed.
	if in.bp, ref = readRequestBody(r, op); ref.status != 0 {
		return ref, false
	}
	in.body = *in.bp

	// 5. Fingerprint, and the keys derived from the body.
	var fp [32]byte
	var ok bool
	if fp, key, ok = fingerprintRequest(op, fq, in.body, key); !ok {
		if op.optional {
			return refusal{}, true
		}
		return refusal{status: http.StatusBadRequest, typ: ProblemKeyMissing, detail: "this operation derives its idempotency key from fields of the JSON body, and the body does not have them all (or is not plain JSON: a Content-Encoding, or a member name repeated, in any letter case, in one object)"}, false
	}
	in.req = ClaimRequest{RecordKey: RecordKey{Scope: op.scope, PrincipalHash: ph, Key: key}, Fingerprint: fp, FingerprintVersion: FingerprintVersion, Lease: op.lease, TTL: op.ttl}
	return refusal{}, false
}

// requestKey is the key r carries in op's header or query parameter (none
// for a key derived from the body). An optional key that is absent lets
// the request run unprotected (pass).
func requestKey(r *http.Request, op *operation) (raw string, ref refusal, pass bool) {
	switch op.key {
	case KeyFromHeader:
		vs := r.Header[op.keyName]
		switch {
		case len(vs) > 1:
			return "", refusal{status: http.StatusBadRequest, typ: ProblemKeyMalformed, detail: "the " + op.keyName + " header appears more than once"}, false
		case len(vs) == 0 && op.optional:
			return "", refusal{}, true
		case len(vs) == 0:
			return "", refusal{status: http.StatusBadRequest, typ: ProblemKeyMissing, detail: "this operation requires an idempotency key in the " + op.keyName + " header"}, false
		}
		return vs[0], refusal{}, false
	case KeyFromQuery:
		v, n := queryValue(r.URL.RawQuery, op.keyName)
		switch {
		case n > 1:
			return "", refusal{status: http.StatusBadRequest, typ: ProblemKeyMalformed, detail: "the query parameter " + op.keyName + " appears more than once"}, false
		case n == 0 && op.optional:
			return "", refusal{}, true
		case n == 0:
			return "", refusal{status: http.StatusBadRequest, typ: ProblemKeyMissing, detail: "this operation requires an idempotency key in the query parameter " + op.keyName}, false
		}
		return v, refusal{}, false
	}
	return "", refusal{}, false
}

// principalHash identifies the caller when op's keys are per caller
// (PrincipalAuth), and is zero otherwise.
func (e *engine) principalHash(r *http.Request, op *operation) ([32]byte, refusal) {
	if op.principal != PrincipalAuth {
		return [32]byte{}, refusal{}
	}
	p, err := e.principal(r)
	if err != nil || p == "" {
		return [32]byte{}, refusal{status: http.StatusUnauthorized, typ: ProblemUnauthenticated, detail: "the caller could not be identified, and keys of this operation are per caller", challenges: op.challenges}
	}
	return HashPrincipal(p), refusal{}
}

// readRequestBody reads r's body whole, up to op's limit, into a pooled
// buffer; bp is nil when the declared length is refused unread.
func readRequestBody(r *http.Request, op *operation) (bp *[]byte, ref refusal) {
	tooLarge := refusal{status: http.StatusRequestEntityTooLarge, typ: ProblemRequestTooLarge, detail: "the request body is larger than this operation accepts"}
	if r.ContentLength > op.maxReq {
		return nil, tooLarge
	}
	bp, err := readBody(r, op.maxReq)
	switch {
	case errors.Is(err, errTooLarge):
		return bp, tooLarge
	case err != nil:
		return bp, refusal{status: http.StatusBadRequest, typ: ProblemBodyUnreadable, detail: "the request body could not be read"}
	}
	return bp, refusal{}
}

// requestFpInput is what r's fingerprint is computed from besides its
// body.
func requestFpInput(r *http.Request, op *operation, params []string) fpInput {
	var ct string
	if vs := r.Header["Content-Type"]; len(vs) > 0 {
		ct = vs[0]
	}
	skip := ""
	if op.key == KeyFromQuery {
		skip = op.keyName
	}
	return fpInput{method: r.Method, route: op.route, params: params, rawQuery: r.URL.RawQuery, skipKey: skip,
		contentType: ct, encoding: r.Header["Content-Encoding"], include: op.include, inc: op.includeToks}
}

// fingerprintRequest computes the request's fingerprint (version
// FingerprintVersion) from fq and body, and returns the key: the one
// given, or the one op derives from the body. ok is false when the body
// lacks the fields a key is derived from.
func fingerprintRequest(op *operation, fq *fpInput, body []byte, key string) ([32]byte, string, bool) {
	c := getCanon()
	defer putCanon(c)
	fp := c.fingerprint(FingerprintVersion, fq, body, op.exclude)
	switch op.key {
	case KeyFromFields:
		var ok bool
		key, ok = fieldsKey(c, op, fq.contentType, fq.encoding, body)
		return fp, key, ok
	case KeyFromBody:
		key = bodyKey(fp)
	}
	return fp, key, true
}

// passThrough runs the handler unprotected (an optional key that is
// absent), on the body the engine read, if it read it (bp).
func passThrough(w http.ResponseWriter, r *http.Request, next http.Handler, bp *[]byte) {
	if bp == nil {
		next.ServeHTTP(w, r)
		return
	}
	orig := r.Body
	r.Body = &bodyReader{b: *bp}
	next.ServeHTTP(w, r)
	r.Body = orig
}

// claimed is the outcome of one claim. tx is set when the key was acquired
// in a transaction that holds the claim (ClaimTxStore): txCtx is its
// context, to release once it is over, and the attempt ends at leaseEnd.
type claimed struct {
	res      ClaimResult
	tx       Tx
	txCtx    *txBound
	leaseEnd time.Time
}

// claim claims in's key until it can answer (CONTRACT §3): it runs the
// handler of an acquired key, replays a completed record, and waits on one
// in progress when op waits, claiming again after each wait. It returns
// the refusal to write otherwise.
func (e *engine) claim(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, in *claimInput, fq *fpInput) refusal {
	ctx := r.Context()
	rk := &in.req.RecordKey
	wait := waitState{poll: waitFirstPoll}
	for {
		var c claimed
		if err := e.claimOnce(ctx, op, &in.req, &c); err != nil {
			return e.storeFailed(ctx, op, *rk, err, "claim")
		}
		switch c.res.State {
		case Acquired:
			e.runAcquired(w, r, op, next, in, c)
			return refusal{}
		case Completed:
			if fingerprintDiffers(&c.res, in.req.Fingerprint, fq, in.body, op.exclude) {
				return e.mismatch(ctx, op, rk.Key)
			}
			return e.replayCompleted(w, r, op, rk, &c.res)
		case InProgress:
			if fingerprintDiffers(&c.res, in.req.Fingerprint, fq, in.body, op.exclude) {
				return e.mismatch(ctx, op, rk.Key)
			}
			if ref := e.waitInProgress(ctx, op, *rk, c.res, &wait); ref.status != 0 {
				return ref
			}
		default:
			return e.storeFailed(ctx, op, *rk, errors.New("store returned an unknown claim state "+c.res.State.String()), "claim")
		}
	}
}

// claimOnce claims req's key within the store bound, into c: in a new
// transaction when op is transactional and the store claims in one, else
// committed.
func (e *engine) claimOnce(ctx context.Context, op *operation, req *ClaimRequest, c *claimed) (err error) {
	if op.transactional && e.claimTx != nil {
		c.tx, c.res, c.leaseEnd, c.txCtx, err = e.beginClaim(ctx, op, *req)
		return err
	}
	sctx, bound := e.storeCtx(ctx, op)
	c.res, err = e.store.Claim(sctx, *req)
	bound.release()
	return err
}

// runAcquired runs the handler of an acquired key: in the transaction that
// holds the claim, in a transaction of its own (transactional mode on a
// committed claim), or on its own.
func (e *engine) runAcquired(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, in *claimInput, c claimed) {
	ctx := r.Context()
	rk, epoch := in.req.RecordKey, c.res.Epoch
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch}
	if c.res.TakenOver {
		e.report(ctx, e.hooks.TakenOver, ev, slog.LevelInfo, "idempotency: took over a record whose lease ended", op, slog.Int64("epoch", epoch))
	} else {
		e.event(ctx, e.hooks.Claimed, ev)
	}
	switch {
	case c.tx != nil:
		defer c.txCtx.release()
		e.inflight.Store(rk, c.leaseEnd)
		defer e.inflight.CompareAndDelete(rk, c.leaseEnd)
		e.runInTx(w, r, op, next, rk, epoch, in.body, c.tx, c.leaseEnd)
	case op.transactional:
		e.runTx(w, r, op, next, rk, epoch, in.body)
	default:
		e.run(w, r, op, next, rk, epoch, in.body)
	}
}

// replayCompleted replays the saved response of a completed record, or
// returns the refusal when there is none to replay.
func (e *engine) replayCompleted(w http.ResponseWriter, r *http.Request, op *operation, rk *RecordKey, res *ClaimResult) refusal {
	ctx := r.Context()
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: res.Epoch}
	if res.Tombstone || res.Response == nil {
		e.report(ctx, e.hooks.Unavailable, ev, slog.LevelDebug, "idempotency: result unavailable (tombstone)", op)
		return refusal{status: http.StatusConflict, typ: ProblemResultUnavailable, detail: "a request with this key completed, but its result was too large to save or could not be recorded; it will not run again with this key"}
	}
	resp, err := e.opened(rk, res)
	if err != nil {
		ev.Err = err
		e.report(ctx, e.hooks.StoreError, ev, slog.LevelError, "idempotency: the saved response cannot be opened", op, slog.Int64("epoch", res.Epoch), slog.Any("error", err))
		return refusal{status: http.StatusServiceUnavailable, typ: ProblemStoreUnavailable, detail: "the saved result of this key cannot be read with this server's encryption keys; the request was not run", retryAfter: storeRetryAfter}
	}
	ev.Status = resp.Status
	e.report(ctx, e.hooks.Replayed, ev, slog.LevelDebug, "idempotency: replayed", op, slog.Int("status", resp.Status))
	replay(w, r, resp)
	return refusal{}
}

// waitState is a request's wait on a record in progress: when the wait
// ends (set at the first in-progress claim) and the next poll's delay.
type waitState struct {
	deadline time.Time
	poll     time.Duration
}

// waitInProgress waits before the next claim of rk, which another attempt
// holds (res), and returns the 409 instead when op does not wait, the wait
// is over or the client went away.
func (e *engine) waitInProgress(ctx context.Context, op *operation, rk RecordKey, res ClaimResult, wait *waitState) refusal {
	e.leaseLeft(rk, &res)
	now := time.Now()
	if op.wait > 0 && wait.deadline.IsZero() {
		wait.deadline = now.Add(op.wait)
	}
	if op.wait <= 0 || !now.Before(wait.deadline) || ctx.Err() != nil {
		e.report(ctx, e.hooks.Conflict, Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: res.Epoch}, slog.LevelDebug, "idempotency: in progress", op)
		return inProgress(res.LeaseRemaining)
	}
	d := min(wait.poll, wait.deadline.Sub(now))
	if res.LeaseRemaining > 0 {
		d = min(d, res.LeaseRemaining+time.Millisecond)
	}
	wait.poll = min(wait.poll*2, waitMaxPoll)
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if ctx.Err() != nil {
		// The client went away while waiting.
		return inProgress(res.LeaseRemaining)
	}
	return refusal{}
}

// inProgress is the 409 of a key whose record is in progress, with the
// lease it has left as Retry-After.
func inProgress(leaseLeft time.Duration) refusal {
	return refusal{status: http.StatusConflict, typ: ProblemInProgress, detail: "a request with this key is in progress; retry later", retryAfter: retrySeconds(leaseLeft)}
}

func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// mismatch reports a key reused with a different request, and returns its
// refusal.
func (e *engine) mismatch(ctx context.Context, op *operation, key string) refusal {
	e.report(ctx, e.hooks.Mismatch, Event{OperationID: op.name, Scope: op.scope, Key: key}, slog.LevelDebug, "idempotency: key reused with a different request", op)
	return refusal{status: http.StatusUnprocessableEntity, typ: ProblemFingerprintMismatch, detail: "this idempotency key was used with a different request (method, path or body); use a new key for a new request"}
}

// storeFailed reports a store call that failed at stage, and returns its
// refusal.
func (e *engine) storeFailed(ctx context.Context, op *operation, rk RecordKey, err error, stage string) refusal {
	e.report(ctx, e.hooks.StoreError, Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Err: err}, slog.LevelWarn, "idempotency: store failed", op, slog.String("stage", stage), slog.Any("error", err))
	return refusal{status: http.StatusServiceUnavailable, typ: ProblemStoreUnavailable, detail: "the idempotency store is unavailable; the request was not run", retryAfter: storeRetryAfter}
}

// storeError reports a store call that failed at stage, and writes its
// refusal.
func (e *engine) storeError(ctx context.Context, w http.ResponseWriter, op *operation, rk RecordKey, err error, stage string) {
	e.storeFailed(ctx, op, rk, err, stage).write(w)
}

// replay writes a saved response.
func replay(w http.ResponseWriter, r *http.Request, resp *SavedResponse) {
	h := w.Header()
	// Copies of the values (the store's slices may be shared, and code
	// after us may write into a header's values), in one backing array
	// when every name has one value, as most do: one pass over the map
	// (a map's iteration has a start-up cost). A name with more values
	// grows the array; the values already set keep the one they are in,
	// each slice capped at its length.
	vals := make([]string, 0, len(resp.Header)+1)
	for k, vs := range resp.Header {
		start := len(vals)
		vals = append(vals, vs...)
		h[k] = vals[start:len(vals):len(vals)]
	}
	n := len(vals) + 1
	vals = append(vals, "true")
	h["Idempotent-Replayed"] = vals[n-1 : n : n]
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 && bodyAllowed(resp.Status) && r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body)
	}
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// bg is the context for completing or releasing a record: the request's
// values without its cancellation, so that a client that hangs up does not
// leave the record in progress.
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// complete saves resp (nil: a tombstone) and reports the outcome.
func (e *engine) complete(ctx context.Context, op *operation, rk RecordKey, epoch int64, resp *SavedResponse) {
	status := 0
	if resp != nil {
		status = resp.Status
	}
	resp, err := e.sealed(rk, epoch, resp)
	if err == nil {
		sctx, bound := e.storeCtx(bg(ctx), op)
		err = e.store.Complete(sctx, Completion{RecordKey: rk, Epoch: epoch, Response: resp, TTL: op.ttl})
		bound.release()
	}
	e.afterComplete(ctx, op, rk, epoch, status, err)
}

func (e *engine) afterComplete(ctx context.Context, op *operation, rk RecordKey, epoch int64, status int, err error) {
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch, Status: status, Err: err}
	switch {
	case err == nil:
		e.event(ctx, e.hooks.Completed, ev)
	case errors.Is(err, ErrFenced):
		e.report(ctx, e.hooks.Fenced, ev, slog.LevelInfo, "idempotency: completion fenced, another attempt owns the key", op, slog.Int64("epoch", epoch))
	default:
		e.report(ctx, e.hooks.StoreError, ev, slog.LevelWarn, "idempotency: saving the result failed; the record stays in progress until its lease ends", op, slog.Any("error", err))
	}
}

func (e *engine) release(ctx context.Context, op *operation, rk RecordKey, epoch int64, status int) {
	sctx, bound := e.storeCtx(bg(ctx), op)
	err := e.store.Release(sctx, rk, epoch)
	bound.release()
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch, Status: status, Err: err}
	switch {
	case err == nil:
		e.report(ctx, e.hooks.Released, ev, slog.LevelDebug, "idempotency: released", op, slog.Int("status", status))
	case errors.Is(err, ErrFenced):
		e.report(ctx, e.hooks.Fenced, ev, slog.LevelInfo, "idempotency: release fenced, another attempt owns the key", op, slog.Int64("epoch", epoch))
	default:
		e.report(ctx, e.hooks.StoreError, ev, slog.LevelWarn, "idempotency: release failed; the record stays in progress until its lease ends", op, slog.Any("error", err))
	}
}

// run runs the handler of an acquired key and saves or releases it.
func (e *engine) run(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, rk RecordKey, epoch int64, body []byte) {
	orig := r.Body
	r.Body = &bodyReader{b: body}
	defer func() { r.Body = orig }()
	cw := &captureWriter{e: e, op: op, w: w, r: r, rk: rk, epoch: epoch}
	normal := false
	defer func() {
		if !normal && !cw.settled {
			// Panic (or runtime.Goexit): release, then let it go on.
			e.release(r.Context(), op, rk, epoch, 0)
		}
	}()
	next.ServeHTTP(cw, r)
	normal = true
	cw.finish()
}

// runTx runs the handler inside a store transaction (transactional mode)
// opened after a committed claim (a TxStore without BeginClaim).
func (e *engine) runTx(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, rk RecordKey, epoch int64, body []byte) {
	ctx := r.Context()
	tx, txCtx, err := e.beginTx(ctx, op)
	defer txCtx.release()
	if err != nil {
		e.release(ctx, op, rk, epoch, 0)
		e.storeError(ctx, w, op, rk, err, "begin transaction")
		return
	}
	e.runInTx(w, r, op, next, rk, epoch, body, tx, time.Time{})
}

// runInTx runs the handler in tx, then completes and commits. A zero
// leaseEnd means the claim was committed before tx began, so undoing the
// attempt means rolling back and releasing the record; otherwise tx holds
// the claim itself (ClaimTxStore), a rollback undoes the attempt whole, and
// the handler's context and the attempt end at leaseEnd.
func (e *engine) runInTx(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, rk RecordKey, epoch int64, body []byte, tx Tx, leaseEnd time.Time) {
	a := &txAttempt{e: e, ctx: r.Context(), op: op, w: w, rk: rk, epoch: epoch, tx: tx, leaseEnd: leaseEnd,
		// The headers set before the handler (by outer middleware) are
		// what a 503 that replaces the handler's response keeps.
		outer: w.Header().Clone()}
	hctx := context.WithValue(a.ctx, txKey{}, tx)
	if a.claimed() {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(hctx, leaseEnd)
		defer cancel()
	}
	r2 := r.WithContext(hctx)
	r2.Body = &bodyReader{b: body}
	cw := &captureWriter{e: e, op: op, w: w, r: r2, rk: rk, epoch: epoch, tx: true}
	a.runHandler(next, cw, r2)
	a.settle(cw)
}

// txAttempt is one run of a transactional operation's handler in tx, from
// the handler's call to the commit or the rollback. leaseEnd is zero when
// the key was claimed before the transaction (the claim is not in tx).
type txAttempt struct {
	e        *engine
	ctx      context.Context
	op       *operation
	w        http.ResponseWriter
	rk       RecordKey
	epoch    int64
	tx       Tx
	leaseEnd time.Time
	outer    http.Header
}

// claimed reports whether the transaction holds the claim.
func (a *txAttempt) claimed() bool { return !a.leaseEnd.IsZero() }

// undo gives the attempt up: the claim goes with the rollback when the
// transaction holds it, else it is released.
func (a *txAttempt) undo(status int) {
	a.e.rollback(a.ctx, a.op, a.tx)
	if !a.claimed() {
		a.e.release(a.ctx, a.op, a.rk, a.epoch, status)
		return
	}
	a.e.report(a.ctx, a.e.hooks.Released, Event{OperationID: a.op.name, Scope: a.op.scope, Key: a.rk.Key, Epoch: a.epoch, Status: status}, slog.LevelDebug, "idempotency: rolled back", a.op, slog.Int("status", status))
}

// resetHeaders puts back the headers set before the handler, for a problem
// (503, or 500 response-too-large) that replaces the handler's response.
func (a *txAttempt) resetHeaders() {
	h := a.w.Header()
	clear(h)
	for k, vs := range a.outer {
		h[k] = vs
	}
}

// runHandler runs the handler; if it panics, the attempt is undone before
// the panic goes on up.
func (a *txAttempt) runHandler(next http.Handler, cw *captureWriter, r *http.Request) {
	normal := false
	defer func() {
		if !normal {
			a.undo(0)
		}
	}()
	next.ServeHTTP(cw, r)
	normal = true
}

// settle ends the attempt after the handler returned: an unsaved status
// rolls back, a saved one completes the record in tx and commits, and any
// failure on the way rolls back and answers 503 in place of the handler's
// response.
func (a *txAttempt) settle(cw *captureWriter) {
	e, ctx, op, rk, epoch, tx := a.e, a.ctx, a.op, a.rk, a.epoch, a.tx
	status := cw.statusOrOK()
	cw.settled = true // the handler returned: later writes are refused
	if cw.over {
		// Past max-response-bytes: the response was dropped (Write), so
		// committing would apply the handler's writes with a result no
		// one will see. Nothing of the attempt happens.
		a.undo(status)
		a.resetHeaders()
		e.logAt(ctx, slog.LevelWarn, "idempotency: the response went past max-response-bytes in a transactional operation; rolled back", op, rk.Key, slog.Int64("max_response_bytes", op.maxResp))
		writeProblem(a.w, http.StatusInternalServerError, ProblemResponseTooLarge, fmt.Sprintf("the response of transactional operation %s went past max-response-bytes (%d bytes); it cannot be saved with the transaction, so the transaction was rolled back: nothing of this attempt happened", op.name, op.maxResp), 0)
		return
	}
	if !cw.saves(status) {
		a.undo(status)
		cw.writeBuffered(status)
		return
	}
	if a.claimed() && !time.Now().Before(a.leaseEnd) {
		// The attempt outlived its lease: its transaction is (or is about
		// to be) rolled back, so nothing of it happened.
		a.undo(status)
		a.resetHeaders()
		e.storeError(ctx, a.w, op, rk, context.DeadlineExceeded, "lease ended in transaction")
		return
	}
	resp, err := e.sealed(rk, epoch, cw.saved(status))
	if err == nil {
		sctx, bound := e.storeCtx(bg(ctx), op)
		err = tx.Complete(sctx, Completion{RecordKey: rk, Epoch: epoch, Response: resp, TTL: op.ttl})
		bound.release()
	}
	if err != nil {
		if errors.Is(err, ErrFenced) {
			// Another attempt owns the key: its run is the one that counts.
			e.rollback(ctx, op, tx)
			e.afterComplete(ctx, op, rk, epoch, status, err)
			a.resetHeaders()
			writeProblem(a.w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "this attempt lost its claim on the key and was rolled back; retry to get the result", storeRetryAfter)
			return
		}
		a.undo(status)
		a.resetHeaders()
		e.storeError(ctx, a.w, op, rk, err, "complete in transaction")
		return
	}
	sctx, bound := e.storeCtx(bg(ctx), op)
	err = tx.Commit(sctx)
	bound.release()
	if err != nil {
		if a.claimed() {
			// Nothing was committed, the claim included: roll back in case
			// the transaction is still open.
			a.undo(status)
		} else {
			e.release(ctx, op, rk, epoch, status)
		}
		a.resetHeaders()
		e.storeError(ctx, a.w, op, rk, err, "commit")
		return
	}
	e.afterComplete(ctx, op, rk, epoch, status, nil)
	cw.writeBuffered(status)
}
