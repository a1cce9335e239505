package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
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

// storeCtx bounds one store call of op.
func (e *engine) storeCtx(ctx context.Context, op *operation) (context.Context, context.CancelFunc) {
	if d := e.bound(op); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// beginTx opens op's transaction within the store bound. The bound covers
// BeginTx alone: the context the transaction is opened with (which
// database/sql watches for the transaction's whole life) is cancelled by
// the returned function, to be called once the transaction has ended, or
// by the bound if BeginTx has not returned by then.
func (e *engine) beginTx(ctx context.Context, op *operation) (Tx, context.CancelFunc, error) {
	txCtx, cancel := context.WithCancel(bg(ctx))
	tx, err := e.boundBegin(ctx, op, cancel, func() (Tx, error) { return e.txStore.BeginTx(txCtx) })
	if err != nil {
		cancel()
		return nil, func() {}, err
	}
	return tx, cancel, nil
}

// beginClaim claims req's key in a new transaction (ClaimTxStore) within
// the store bound. The transaction lives at most op's lease: its context
// ends then (a store on database/sql rolls it back), and the handler's
// context with it. The returned function ends the transaction's context;
// call it once the transaction is over. tx is nil unless the result is
// Acquired.
func (e *engine) beginClaim(ctx context.Context, op *operation, req ClaimRequest) (Tx, ClaimResult, time.Time, context.CancelFunc, error) {
	deadline := time.Now().Add(op.lease)
	txCtx, cancel := context.WithDeadline(bg(ctx), deadline)
	var res ClaimResult
	tx, err := e.boundBegin(ctx, op, cancel, func() (tx Tx, err error) {
		tx, res, err = e.claimTx.BeginClaim(txCtx, req)
		return tx, err
	})
	if err == nil && (tx == nil) != (res.State != Acquired) {
		if tx != nil {
			e.rollback(ctx, op, tx)
		}
		err = errors.New("store's BeginClaim returned " + res.State.String() + " with a transaction that does not match it")
	}
	if err != nil || tx == nil {
		cancel()
		return nil, res, deadline, func() {}, err
	}
	return tx, res, deadline, cancel, nil
}

// boundBegin runs begin, which opens a transaction whose context cancel
// ends, and calls cancel when the store bound ends first. A transaction
// opened as the bound ended has a cancelled context and cannot be used: it
// is rolled back and the result is context.DeadlineExceeded.
func (e *engine) boundBegin(ctx context.Context, op *operation, cancel context.CancelFunc, begin func() (Tx, error)) (Tx, error) {
	d := e.bound(op)
	if d <= 0 {
		return begin()
	}
	t := time.AfterFunc(d, cancel)
	tx, err := begin()
	if !t.Stop() && tx != nil && err == nil {
		e.rollback(ctx, op, tx)
		return nil, context.DeadlineExceeded
	}
	return tx, err
}

// rollback rolls tx back within the store bound.
func (e *engine) rollback(ctx context.Context, op *operation, tx Tx) {
	sctx, cancel := e.storeCtx(bg(ctx), op)
	defer cancel()
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

// serve runs one request of a protected operation (CONTRACT §2-§4).
func (e *engine) serve(w http.ResponseWriter, r *http.Request, op *operation, next http.Handler, params []string) {
	ctx := r.Context()

	// 1. A key from a header or the query; an optional key that is absent
	// lets the request run unprotected.
	var rawKey string
	switch op.key {
	case KeyFromHeader:
		vs := r.Header[op.keyName]
		if len(vs) > 1 {
			writeProblem(w, http.StatusBadRequest, ProblemKeyMalformed, "the "+op.keyName+" header appears more than once", 0, false)
			return
		}
		if len(vs) == 0 {
			if op.optional {
				next.ServeHTTP(w, r)
				return
			}
			writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "this operation requires an idempotency key in the "+op.keyName+" header", 0, false)
			return
		}
		rawKey = vs[0]
	case KeyFromQuery:
		v, n := queryValue(r.URL.RawQuery, op.keyName)
		if n > 1 {
			writeProblem(w, http.StatusBadRequest, ProblemKeyMalformed, "the query parameter "+op.keyName+" appears more than once", 0, false)
			return
		}
		if n == 0 {
			if op.optional {
				next.ServeHTTP(w, r)
				return
			}
			writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "this operation requires an idempotency key in the query parameter "+op.keyName, 0, false)
			return
		}
		rawKey = v
	}

	// 2. The principal.
	var ph [32]byte
	if op.principal == PrincipalAuth {
		p, err := e.principal(r)
		if err != nil || p == "" {
			for _, c := range op.challenges {
				w.Header().Add("WWW-Authenticate", c)
			}
			writeProblem(w, http.StatusUnauthorized, ProblemUnauthenticated, "the caller could not be identified, and keys of this operation are per caller", 0, false)
			return
		}
		ph = HashPrincipal(p)
	}

	// 3. Key syntax.
	var key string
	if op.key == KeyFromHeader || op.key == KeyFromQuery {
		k, err := ParseKey(rawKey)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, ProblemKeyMalformed, err.Error()+"; a key is 1 to 255 visible ASCII characters", 0, false)
			return
		}
		key = k
	}

	// 4. The body, whole, before anything is claimed.
	if r.ContentLength > op.maxReq {
		writeProblem(w, http.StatusRequestEntityTooLarge, ProblemRequestTooLarge, "the request body is larger than this operation accepts", 0, false)
		return
	}
	bp, err := readBody(r, op.maxReq)
	defer putBody(bp)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			writeProblem(w, http.StatusRequestEntityTooLarge, ProblemRequestTooLarge, "the request body is larger than this operation accepts", 0, false)
		} else {
			writeProblem(w, http.StatusBadRequest, ProblemBodyUnreadable, "the request body could not be read", 0, false)
		}
		return
	}
	body := *bp

	// 5. Fingerprint, and the keys derived from the body.
	c := getCanon()
	var ct string
	if vs := r.Header["Content-Type"]; len(vs) > 0 {
		ct = vs[0]
	}
	skip := ""
	if op.key == KeyFromQuery {
		skip = op.keyName
	}
	fq := &fpInput{method: r.Method, route: op.route, params: params, rawQuery: r.URL.RawQuery, skipKey: skip,
		contentType: ct, encoding: r.Header["Content-Encoding"], include: op.include, inc: op.includeToks}
	fp := c.fingerprint(FingerprintVersion, fq, body, op.exclude)
	switch op.key {
	case KeyFromFields:
		var ok bool
		if key, ok = fieldsKey(c, op, ct, fq.encoding, body); !ok {
			putCanon(c)
			if op.optional {
				orig := r.Body
				r.Body = &bodyReader{b: body}
				next.ServeHTTP(w, r)
				r.Body = orig
				return
			}
			writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "this operation derives its idempotency key from fields of the JSON body, and the body does not have them all (or is not plain JSON: a Content-Encoding, or a member name repeated, in any letter case, in one object)", 0, false)
			return
		}
	case KeyFromBody:
		key = bodyKey(fp)
	}
	putCanon(c)

	// 6. Claim.
	rk := RecordKey{Scope: op.scope, PrincipalHash: ph, Key: key}
	req := ClaimRequest{RecordKey: rk, Fingerprint: fp, FingerprintVersion: FingerprintVersion, Lease: op.lease, TTL: op.ttl}
	var deadline time.Time
	poll := waitFirstPoll
	for {
		var (
			res      ClaimResult
			tx       Tx
			endTx    context.CancelFunc
			leaseEnd time.Time
			err      error
		)
		if op.transactional && e.claimTx != nil {
			tx, res, leaseEnd, endTx, err = e.beginClaim(ctx, op, req)
		} else {
			sctx, cancel := e.storeCtx(ctx, op)
			res, err = e.store.Claim(sctx, req)
			cancel()
		}
		if err != nil {
			e.storeError(ctx, w, op, rk, err, "claim")
			return
		}
		switch res.State {
		case Acquired:
			if res.TakenOver {
				e.event(ctx, e.hooks.TakenOver, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch})
				e.logAt(ctx, slog.LevelInfo, "idempotency: took over a record whose lease ended", op, key, slog.Int64("epoch", res.Epoch))
			} else {
				e.event(ctx, e.hooks.Claimed, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch})
			}
			switch {
			case tx != nil:
				defer endTx()
				e.inflight.Store(rk, leaseEnd)
				defer e.inflight.CompareAndDelete(rk, leaseEnd)
				e.runInTx(w, r, op, next, rk, res.Epoch, body, tx, leaseEnd)
			case op.transactional:
				e.runTx(w, r, op, next, rk, res.Epoch, body)
			default:
				e.run(w, r, op, next, rk, res.Epoch, body)
			}
			return
		case Completed:
			if fingerprintDiffers(res, fp, fq, body, op.exclude) {
				e.mismatch(ctx, w, op, key)
				return
			}
			if res.Tombstone || res.Response == nil {
				e.event(ctx, e.hooks.Unavailable, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch})
				e.logAt(ctx, slog.LevelDebug, "idempotency: result unavailable (tombstone)", op, key)
				writeProblem(w, http.StatusConflict, ProblemResultUnavailable, "a request with this key completed, but its result was too large to save or could not be recorded; it will not run again with this key", 0, false)
				return
			}
			resp, err := e.opened(rk, res)
			if err != nil {
				e.event(ctx, e.hooks.StoreError, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch, Err: err})
				e.logAt(ctx, slog.LevelError, "idempotency: the saved response cannot be opened", op, key, slog.Int64("epoch", res.Epoch), slog.Any("error", err))
				writeProblem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "the saved result of this key cannot be read with this server's encryption keys; the request was not run", storeRetryAfter, false)
				return
			}
			e.event(ctx, e.hooks.Replayed, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch, Status: resp.Status})
			e.logAt(ctx, slog.LevelDebug, "idempotency: replayed", op, key, slog.Int("status", resp.Status))
			replay(w, r, resp)
			return
		case InProgress:
			if fingerprintDiffers(res, fp, fq, body, op.exclude) {
				e.mismatch(ctx, w, op, key)
				return
			}
			e.leaseLeft(rk, &res)
			now := time.Now()
			if op.wait > 0 && deadline.IsZero() {
				deadline = now.Add(op.wait)
			}
			if op.wait <= 0 || !now.Before(deadline) || ctx.Err() != nil {
				e.event(ctx, e.hooks.Conflict, Event{OperationID: op.name, Scope: op.scope, Key: key, Epoch: res.Epoch})
				e.logAt(ctx, slog.LevelDebug, "idempotency: in progress", op, key)
				writeProblem(w, http.StatusConflict, ProblemInProgress, "a request with this key is in progress; retry later", retrySeconds(res.LeaseRemaining), false)
				return
			}
			d := min(poll, deadline.Sub(now))
			if res.LeaseRemaining > 0 {
				d = min(d, res.LeaseRemaining+time.Millisecond)
			}
			poll = min(poll*2, waitMaxPoll)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			if ctx.Err() != nil {
				// The client went away while waiting.
				writeProblem(w, http.StatusConflict, ProblemInProgress, "a request with this key is in progress; retry later", retrySeconds(res.LeaseRemaining), false)
				return
			}
		default:
			e.storeError(ctx, w, op, rk, errors.New("store returned an unknown claim state "+res.State.String()), "claim")
			return
		}
	}
}

func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

func (e *engine) mismatch(ctx context.Context, w http.ResponseWriter, op *operation, key string) {
	e.event(ctx, e.hooks.Mismatch, Event{OperationID: op.name, Scope: op.scope, Key: key})
	e.logAt(ctx, slog.LevelDebug, "idempotency: key reused with a different request", op, key)
	writeProblem(w, http.StatusUnprocessableEntity, ProblemFingerprintMismatch, "this idempotency key was used with a different request (method, path or body); use a new key for a new request", 0, false)
}

func (e *engine) storeError(ctx context.Context, w http.ResponseWriter, op *operation, rk RecordKey, err error, stage string) {
	e.event(ctx, e.hooks.StoreError, Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Err: err})
	e.logAt(ctx, slog.LevelWarn, "idempotency: store failed", op, rk.Key, slog.String("stage", stage), slog.Any("error", err))
	writeProblem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "the idempotency store is unavailable; the request was not run", storeRetryAfter, false)
}

// replay writes a saved response.
func replay(w http.ResponseWriter, r *http.Request, resp *SavedResponse) {
	h := w.Header()
	// One backing array for every value (the store's slices may be shared,
	// and code after us may write into a header's values).
	n := 1
	for _, vs := range resp.Header {
		n += len(vs)
	}
	vals := make([]string, 0, n)
	for k, vs := range resp.Header {
		start := len(vals)
		vals = append(vals, vs...)
		h[k] = vals[start:len(vals):len(vals)]
	}
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
		sctx, cancel := e.storeCtx(bg(ctx), op)
		err = e.store.Complete(sctx, Completion{RecordKey: rk, Epoch: epoch, Response: resp, TTL: op.ttl})
		cancel()
	}
	e.afterComplete(ctx, op, rk, epoch, status, err)
}

func (e *engine) afterComplete(ctx context.Context, op *operation, rk RecordKey, epoch int64, status int, err error) {
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch, Status: status, Err: err}
	switch {
	case err == nil:
		e.event(ctx, e.hooks.Completed, ev)
	case errors.Is(err, ErrFenced):
		e.event(ctx, e.hooks.Fenced, ev)
		e.logAt(ctx, slog.LevelInfo, "idempotency: completion fenced, another attempt owns the key", op, rk.Key, slog.Int64("epoch", epoch))
	default:
		e.event(ctx, e.hooks.StoreError, ev)
		e.logAt(ctx, slog.LevelWarn, "idempotency: saving the result failed; the record stays in progress until its lease ends", op, rk.Key, slog.Any("error", err))
	}
}

func (e *engine) release(ctx context.Context, op *operation, rk RecordKey, epoch int64, status int) {
	sctx, cancel := e.storeCtx(bg(ctx), op)
	err := e.store.Release(sctx, rk, epoch)
	cancel()
	ev := Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch, Status: status, Err: err}
	switch {
	case err == nil:
		e.event(ctx, e.hooks.Released, ev)
		e.logAt(ctx, slog.LevelDebug, "idempotency: released", op, rk.Key, slog.Int("status", status))
	case errors.Is(err, ErrFenced):
		e.event(ctx, e.hooks.Fenced, ev)
		e.logAt(ctx, slog.LevelInfo, "idempotency: release fenced, another attempt owns the key", op, rk.Key, slog.Int64("epoch", epoch))
	default:
		e.event(ctx, e.hooks.StoreError, ev)
		e.logAt(ctx, slog.LevelWarn, "idempotency: release failed; the record stays in progress until its lease ends", op, rk.Key, slog.Any("error", err))
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
	tx, endTx, err := e.beginTx(ctx, op)
	defer endTx()
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
	ctx := r.Context()
	claimed := !leaseEnd.IsZero()
	// undo gives the attempt up: the claim goes with the rollback when the
	// transaction holds it, else it is released.
	undo := func(status int) {
		e.rollback(ctx, op, tx)
		if !claimed {
			e.release(ctx, op, rk, epoch, status)
			return
		}
		e.event(ctx, e.hooks.Released, Event{OperationID: op.name, Scope: op.scope, Key: rk.Key, Epoch: epoch, Status: status})
		e.logAt(ctx, slog.LevelDebug, "idempotency: rolled back", op, rk.Key, slog.Int("status", status))
	}
	// The headers set before the handler (by outer middleware) are what a
	// 503 that replaces the handler's response keeps.
	outer := w.Header().Clone()
	resetHeaders := func() {
		h := w.Header()
		clear(h)
		for k, vs := range outer {
			h[k] = vs
		}
	}
	hctx := context.WithValue(ctx, txKey{}, tx)
	if claimed {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(hctx, leaseEnd)
		defer cancel()
	}
	r2 := r.WithContext(hctx)
	r2.Body = &bodyReader{b: body}
	cw := &captureWriter{e: e, op: op, w: w, r: r2, rk: rk, epoch: epoch, tx: true}
	normal := false
	defer func() {
		if !normal {
			undo(0)
		}
	}()
	next.ServeHTTP(cw, r2)
	normal = true

	status := cw.statusOrOK()
	if !cw.saves(status) {
		undo(status)
		cw.writeBuffered(status)
		return
	}
	if claimed && !time.Now().Before(leaseEnd) {
		// The attempt outlived its lease: its transaction is (or is about
		// to be) rolled back, so nothing of it happened.
		undo(status)
		resetHeaders()
		e.storeError(ctx, w, op, rk, context.DeadlineExceeded, "lease ended in transaction")
		return
	}
	var resp *SavedResponse
	if !cw.over {
		resp = cw.saved(status)
	}
	resp, err := e.sealed(rk, epoch, resp)
	if err == nil {
		sctx, cancel := e.storeCtx(bg(ctx), op)
		err = tx.Complete(sctx, Completion{RecordKey: rk, Epoch: epoch, Response: resp, TTL: op.ttl})
		cancel()
	}
	if err != nil {
		if errors.Is(err, ErrFenced) {
			// Another attempt owns the key: its run is the one that counts.
			e.rollback(ctx, op, tx)
			e.afterComplete(ctx, op, rk, epoch, status, err)
			resetHeaders()
			writeProblem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "this attempt lost its claim on the key and was rolled back; retry to get the result", storeRetryAfter, false)
			return
		}
		undo(status)
		resetHeaders()
		e.storeError(ctx, w, op, rk, err, "complete in transaction")
		return
	}
	sctx, cancel := e.storeCtx(bg(ctx), op)
	err = tx.Commit(sctx)
	cancel()
	if err != nil {
		if claimed {
			// Nothing was committed, the claim included: roll back in case
			// the transaction is still open.
			undo(status)
		} else {
			e.release(ctx, op, rk, epoch, status)
		}
		resetHeaders()
		e.storeError(ctx, w, op, rk, err, "commit")
		return
	}
	e.afterComplete(ctx, op, rk, epoch, status, nil)
	cw.writeBuffered(status)
}
