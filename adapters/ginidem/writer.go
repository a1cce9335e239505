package ginidem

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

const noWritten = -1

var errHijackAfterWrite = errors.New("ginidem: response body already written")

// writer is a gin.ResponseWriter over the engine's capture writer, with
// gin's own semantics: WriteHeader only records the status, which goes out
// with the first write or WriteHeaderNow (gin writes it after its
// handlers).
type writer struct {
	w      http.ResponseWriter
	ctx    context.Context
	status int
	size   int
}

var _ gin.ResponseWriter = (*writer)(nil)

func newWriter(w http.ResponseWriter, r *http.Request) *writer {
	return &writer{w: w, ctx: r.Context(), status: http.StatusOK, size: noWritten}
}

func (w *writer) Header() http.Header { return w.w.Header() }

// Unwrap lets http.ResponseController reach the capture writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.w }

func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

func (w *writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.w.WriteHeader(w.status)
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.w.Write(p)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.w, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int   { return w.status }
func (w *writer) Size() int     { return w.size }
func (w *writer) Written() bool { return w.size != noWritten }

func (w *writer) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.w).Flush()
}

func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.size > 0 {
		return nil, nil, errHijackAfterWrite
	}
	if w.size < 0 {
		w.size = 0
	}
	return http.NewResponseController(w.w).Hijack()
}

// CloseNotify reports the end of the request's context (the capture writer
// has no CloseNotifier; the context is the modern way to hear it).
func (w *writer) CloseNotify() <-chan bool {
	ch := make(chan bool, 1)
	context.AfterFunc(w.ctx, func() { ch <- true })
	return ch
}

// Pusher is nil: a pushed resource could not be saved and replayed.
func (w *writer) Pusher() http.Pusher { return nil }
