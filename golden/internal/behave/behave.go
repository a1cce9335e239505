// Package behave holds the small HTTP helpers the golden cases'
// behaviour tests share: send a request to a test server, read the
// response, and hold a handler in progress to provoke a 409.
package behave

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Resp is a response read whole.
type Resp struct {
	Status int
	Header http.Header
	Body   string
}

// Replayed reports whether the response is a replay.
func (r *Resp) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// Do sends one request; header holds extra headers (name -> value).
func Do(t testing.TB, h http.Handler, method, target string, header map[string]string, body string) *Resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &Resp{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Want checks a response's status and whether it is a replay.
func Want(t testing.TB, what string, r *Resp, status int, replayed bool) {
	t.Helper()
	if r.Status != status || r.Replayed() != replayed {
		t.Errorf("%s: status %d (replayed %v), want %d (replayed %v); body %s", what, r.Status, r.Replayed(), status, replayed, r.Body)
	}
}

// WantProblem checks that r is an RFC 9457 problem with the status.
func WantProblem(t testing.TB, what string, r *Resp, status int) {
	t.Helper()
	Want(t, what, r, status, false)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil || p.Status != status || p.Type == "" {
		t.Errorf("%s: problem body %s (err %v), want a type and status %d", what, r.Body, err, status)
	}
}

// Counter is a handler that counts its calls and answers status with a
// body naming the call number, so replays can be told from re-runs.
type Counter struct {
	N      atomic.Int64
	Status int
	// Header is set on every response.
	Header map[string]string
	// Gate, when set, holds each call until it is closed (see Hold).
	Gate    chan struct{}
	Entered chan struct{}
}

func (c *Counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.N.Add(1)
	if c.Entered != nil {
		c.Entered <- struct{}{}
	}
	if c.Gate != nil {
		<-c.Gate
	}
	for k, v := range c.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	status := c.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"call": n, "path": r.URL.Path, "method": r.Method})
	w.Write(body)
}

// InProgress starts a request through h that the Counter c holds, runs
// during while it is held, then releases it and returns its response.
func InProgress(t testing.TB, h http.Handler, c *Counter, method, target string, header map[string]string, body string, during func()) *Resp {
	t.Helper()
	c.Gate = make(chan struct{})
	c.Entered = make(chan struct{}, 1)
	done := make(chan *Resp, 1)
	go func() { done <- Do(t, h, method, target, header, body) }()
	select {
	case <-c.Entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held request never reached the handler")
	}
	during()
	close(c.Gate)
	r := <-done
	c.Gate, c.Entered = nil, nil
	return r
}
