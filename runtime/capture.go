package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// Capture modes.
const (
	modeBuffer   = iota // the response is buffered until the handler returns
	modeStream          // Flush was called: written through, and teed for saving
	modePass            // written through, nothing more to save
	modeHijacked        // the connection was hijacked
)

var errTxHijack = errors.New("idempotency: Hijack is not supported in transactional mode")

// ErrWriteAfterReturn is returned by the Write of an idempotent operation's
// ResponseWriter called after its handler returned (from a goroutine the
// handler left behind): the response was already saved and sent without
// those bytes, so they are not taken, rather than taken and lost.
var ErrWriteAfterReturn = errors.New("idempotency: Write after the handler returned: its response was already saved and sent")

// ErrResponseTooLarge is returned by the Write of a transactional
// operation's ResponseWriter that takes its response past
// max-response-bytes, and by every Write after it: the response can be
// neither saved nor sent before the commit, so the attempt is rolled back
// when the handler returns and answered 500 response-too-large (see
// docs/contract.md §11). The handler may stop writing at once.
var ErrResponseTooLarge = errors.New("idempotency: the response of a transactional operation went past max-response-bytes: it is dropped, and the transaction will be rolled back")

// captureWriter buffers a handler's response so that the result is saved
// before the client sees it (see docs/contract.md for Flush and Hijack).
// The handler's headers go straight into the underlying writer's header map.
type captureWriter struct {
	e     *engine
	op    *operation
	w     http.ResponseWriter
	r     *http.Request
	rk    RecordKey
	epoch int64
	tx    bool

	status   int
	buf      []byte
	over     bool // the body went past MaxResponseBytes (dropped, in transactional mode)
	mode     int
	settled  bool // the record was completed or released
	declined bool // the handler called DoNotSave
}

// saves reports whether a response with status is saved: it is in the
// operation's save classes and the handler did not decline it.
func (cw *captureWriter) saves(status int) bool {
	return !cw.declined && cw.op.saves(status)
}

func (cw *captureWriter) Header() http.Header { return cw.w.Header() }

// Unwrap lets http.ResponseController reach the underlying writer (for
// deadlines and full duplex).
func (cw *captureWriter) Unwrap() http.ResponseWriter { return cw.w }

func (cw *captureWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		// As net/http does, but inside the handler, so that the key is
		// released rather than an unwritable status saved.
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if cw.status != 0 || cw.mode == modeHijacked {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// Informational responses (103 Early Hints) go out at once.
		cw.w.WriteHeader(code)
		return
	}
	cw.status = code
}

func (cw *captureWriter) statusOrOK() int {
	if cw.status == 0 {
		return http.StatusOK
	}
	return cw.status
}

func (cw *captureWriter) Write(p []byte) (int, error) {
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	switch cw.mode {
	case modeHijacked:
		return 0, http.ErrHijacked
	case modeBuffer:
		if cw.settled {
			return 0, ErrWriteAfterReturn
		}
		if cw.over {
			// Transactional, past the cap: see below.
			return 0, ErrResponseTooLarge
		}
	case modePass:
		return cw.w.Write(p)
	case modeStream:
		if !cw.over {
			if int64(len(cw.buf)+len(p)) > cw.op.maxResp {
				cw.over, cw.buf = true, nil
			} else {
				cw.buf = append(cw.buf, p...)
			}
		}
		return cw.w.Write(p)
	}
	if int64(len(cw.buf)+len(p)) <= cw.op.maxResp {
		cw.buf = append(cw.buf, p...)
		return len(p), nil
	}
	cw.over = true
	if cw.tx {
		// The transaction commits after the handler returns, and nothing
		// of the response may reach the client before it (the commit may
		// fail): a response past the cap could only be kept whole, in
		// memory. It is dropped instead, and the attempt is rolled back
		// when the handler returns (txAttempt.settle).
		cw.buf = nil
		return 0, ErrResponseTooLarge
	}
	// Too large to save: settle the record now (a tombstone, so that a retry
	// gets 409 rather than a second run), then pass the rest through.
	if cw.saves(cw.status) {
		cw.e.complete(cw.r.Context(), cw.op, cw.rk, cw.epoch, nil)
	} else {
		cw.e.release(cw.r.Context(), cw.op, cw.rk, cw.epoch, cw.status)
	}
	cw.settled = true
	cw.mode = modePass
	cw.w.WriteHeader(cw.status)
	if len(cw.buf) > 0 {
		if _, err := cw.w.Write(cw.buf); err != nil {
			cw.buf = nil
			return 0, err
		}
	}
	cw.buf = nil
	return cw.w.Write(p)
}

// Flush switches to streaming: what was buffered goes out, and later writes
// go straight to the client. The body is still recorded (up to the cap)
// and saved when the handler returns. In transactional mode Flush does
// nothing: the response waits for the commit.
func (cw *captureWriter) Flush() {
	if cw.tx || cw.mode == modeHijacked {
		return
	}
	if cw.mode == modeBuffer && cw.settled {
		// After the handler returned (a goroutine it left behind): the
		// buffered response was sent already, and must neither go out
		// twice nor open the way to later writes (ErrWriteAfterReturn).
		return
	}
	if cw.mode == modeBuffer {
		cw.status = cw.statusOrOK()
		if cw.saves(cw.status) {
			cw.mode = modeStream
		} else {
			cw.e.release(cw.r.Context(), cw.op, cw.rk, cw.epoch, cw.status)
			cw.settled = true
			cw.mode = modePass
		}
		cw.w.WriteHeader(cw.status)
		if len(cw.buf) > 0 {
			_, _ = cw.w.Write(cw.buf)
		}
		if cw.mode == modePass {
			cw.buf = nil
		}
	}
	_ = http.NewResponseController(cw.w).Flush()
}

// Hijack hands the connection to the handler. The record becomes a
// tombstone first (what the handler then writes cannot be seen), so a
// retry gets 409 result-unavailable instead of a second run.
func (cw *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if cw.tx {
		return nil, nil, errTxHijack
	}
	conn, brw, err := http.NewResponseController(cw.w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	cw.mode = modeHijacked
	cw.buf = nil
	if !cw.settled {
		cw.e.complete(cw.r.Context(), cw.op, cw.rk, cw.epoch, nil)
		cw.settled = true
	}
	return conn, brw, nil
}

// saved builds the response to store: status, the replayable headers and
// the buffered body.
func (cw *captureWriter) saved(status int) *SavedResponse {
	h := cw.w.Header()
	if _, ok := h["Content-Type"]; !ok && len(cw.buf) > 0 && bodyAllowed(status) {
		// What net/http would sniff when writing it; set now so that the
		// replay carries the same type.
		h.Set("Content-Type", http.DetectContentType(cw.buf))
	}
	out := &SavedResponse{Status: status, Header: make(http.Header, 4), Body: cw.buf}
	for _, name := range cw.op.replay {
		if vs, ok := h[name]; ok && len(vs) > 0 {
			cp := make([]string, len(vs))
			copy(cp, vs)
			out.Header[name] = cp
		}
	}
	savedOtherSpellings(out.Header, h, cw.op.replay)
	if out.Body == nil {
		out.Body = []byte{}
	}
	return out
}

// savedOtherSpellings adds to saved the replayable headers that the handler
// set under a non-canonical name (w.Header()["x-request-id"] = ...):
// net/http sends them as they are, so the replay must carry them too. They
// are saved under the canonical name, after the canonical spelling's
// values, in the order net/http writes them (sorted by name). Names that
// are never replayed stay out whatever their spelling, as they are not in
// replay.
func savedOtherSpellings(saved, h http.Header, replay []string) {
	var names []string
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		if c := http.CanonicalHeaderKey(k); c != k && slices.Contains(replay, c) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		c := http.CanonicalHeaderKey(k)
		saved[c] = append(slices.Clip(saved[c]), h[k]...)
	}
}

// finish settles the record after the handler returned normally and, in
// buffer mode, writes the response (after the record is saved).
func (cw *captureWriter) finish() {
	switch cw.mode {
	case modeHijacked, modePass:
		return
	case modeStream:
		if !cw.settled && cw.declined {
			cw.e.release(cw.r.Context(), cw.op, cw.rk, cw.epoch, cw.status)
			cw.settled = true
		}
		if !cw.settled {
			var resp *SavedResponse
			if !cw.over {
				resp = cw.saved(cw.status)
			}
			cw.e.complete(cw.r.Context(), cw.op, cw.rk, cw.epoch, resp)
			cw.settled = true
		}
		return
	}
	status := cw.statusOrOK()
	if cw.saves(status) {
		cw.e.complete(cw.r.Context(), cw.op, cw.rk, cw.epoch, cw.saved(status))
	} else {
		cw.e.release(cw.r.Context(), cw.op, cw.rk, cw.epoch, status)
	}
	cw.settled = true
	cw.writeBuffered(status)
}

// writeBuffered sends the buffered response to the client.
func (cw *captureWriter) writeBuffered(status int) {
	h := cw.w.Header()
	if _, ok := h["Content-Length"]; !ok && bodyAllowed(status) && cw.r.Method != http.MethodHead {
		if _, te := h["Transfer-Encoding"]; !te {
			h["Content-Length"] = []string{strconv.Itoa(len(cw.buf))}
		}
	}
	cw.w.WriteHeader(status)
	if len(cw.buf) > 0 && bodyAllowed(status) && cw.r.Method != http.MethodHead {
		_, _ = cw.w.Write(cw.buf)
	}
}
