package runtime

import "net/http"

// DoNotSave declines to save the response that the handler is writing on
// w, whatever its status: the client gets it as written, the key is
// released (as for a response outside the operation's save classes), and a
// retry with the same key runs the handler again. In transactional mode the
// transaction rolls back, as for any response that is not saved: the
// handler's writes commit only together with a saved record, never without
// one. Call it from the handler of an idempotent operation, with the
// ResponseWriter it was given (or a wrapper of it that has an
// Unwrap() http.ResponseWriter method, as http.ResponseController
// expects), before it returns.
//
// It reports whether the decline took effect. It is false when w is not
// an idempotent operation's writer, and when it is too late: the record
// was settled already, because the response went past max-response-bytes
// (a tombstone), the connection was hijacked, or a response outside save
// was flushed (released then).
func DoNotSave(w http.ResponseWriter) bool {
	for range maxUnwrap {
		switch x := w.(type) {
		case *captureWriter:
			return x.decline()
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// maxUnwrap bounds the wrappers DoNotSave looks through (a wrapper that
// unwraps to itself must not loop for ever).
const maxUnwrap = 64

func (cw *captureWriter) decline() bool {
	if cw.settled || cw.mode == modeHijacked {
		return false
	}
	cw.declined = true
	return true
}
