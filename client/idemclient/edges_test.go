package idemclient

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A Retry-After too large for a time.Duration is clamped, not wrapped
// around to a negative wait (which retried at once).
func TestHugeRetryAfterIsClamped(t *testing.T) {
	for _, v := range []string{"9300000000", "9223372037", "99999999999999999999999"} {
		if d := retryAfter(v); d < 365*24*time.Hour {
			t.Errorf("Retry-After %s gives %v; want a wait of at least a year", v, d)
		}
	}
	tr, _ := New(Options{}, testPolicies...)
	resp := &http.Response{Header: http.Header{"Retry-After": {"9300000000"}}}
	if d := tr.backoff(1, resp); d < tr.opts.Budget {
		t.Errorf("Retry-After 9300000000 waits %v, shorter than the budget %v", d, tr.opts.Budget)
	}
	// End to end: the wait is past the budget, so the 503 is the answer
	// after one attempt, at once.
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"9300000000"}}, Body: http.NoBody, Request: r}, nil
	})
	tr, _ = New(Options{Base: base}, testPolicies...)
	var res Result
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), &res), "POST", "http://x/v1/charges", nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || n != 1 || res.Attempts != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("resp %v, err %v, %d sent, result %+v in %v; want the 503 after one attempt", resp, err, n, res, time.Since(start))
	}
}

// dropOnce is a server (on a raw listener, so that it can cut a
// connection mid-request) that answers every request 201, except the
// first request it reads on a connection that already served one: that
// one it reads whole and then drops the connection without answering.
// net/http's Transport retries such a request by itself on a new
// connection when it carries an Idempotency-Key header.
type dropOnce struct {
	mu      sync.Mutex
	dropped bool
	got     int // requests read in whole, the dropped one included
}

func (d *dropOnce) serve(t *testing.T, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for served := 0; ; served++ {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				d.mu.Lock()
				d.got++
				drop := served > 0 && !d.dropped
				d.dropped = d.dropped || drop
				d.mu.Unlock()
				if drop {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
			}
		}()
	}
}

// Result.Attempts counts every attempt that reached the server, net/http's
// own retry of a request with an Idempotency-Key included.
func TestAttemptsCountTransportRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &dropOnce{}
	go d.serve(t, ln)
	base := &http.Transport{MaxIdleConnsPerHost: 1}
	defer base.CloseIdleConnections()
	c := newClient(t, Options{Base: base})
	url := "http://" + ln.Addr().String() + "/v1/charges"
	var first, second Result
	if resp := post(t, c, url, `{"n":1}`, &first); resp.StatusCode != 201 || first.Attempts != 1 {
		t.Fatalf("first request: status %d after %d attempts; want 201 after 1", resp.StatusCode, first.Attempts)
	}
	// The second request goes out on the kept-alive connection, is read
	// and dropped, and net/http sends it again on a new connection.
	resp := post(t, c, url, `{"n":2}`, &second)
	d.mu.Lock()
	got, dropped := d.got, d.dropped
	d.mu.Unlock()
	if !dropped || got != 3 {
		t.Fatalf("the server read %d requests (dropped one: %v); want 3 with one dropped", got, dropped)
	}
	if resp.StatusCode != 201 || second.Attempts != 2 {
		t.Fatalf("second request: status %d, Attempts %d; want 201 and 2 (net/http's own retry reached the server)", resp.StatusCode, second.Attempts)
	}
}

// A Retry-After date centuries ahead is clamped like a huge delay:
// time.Until saturates at the largest time.Duration, and adding the time
// spent to that wrapped around to a negative total, so the budget check
// passed and the transport slept (until the context ended).
func TestFarRetryAfterDateIsClamped(t *testing.T) {
	const far = "Fri, 31 Dec 9999 23:59:59 GMT"
	if d := retryAfter(far); d < 365*24*time.Hour || d > maxRetryAfter {
		t.Errorf("Retry-After %s gives %v; want at least a year and at most %v", far, d, maxRetryAfter)
	}
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {far}}, Body: http.NoBody, Request: r}, nil
	})
	tr, _ := New(Options{Base: base}, testPolicies...)
	var res Result
	ctx, cancel := context.WithTimeout(WithResult(context.Background(), &res), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://x/v1/charges", nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || n != 1 || res.Attempts != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("resp %v, err %v, %d sent, result %+v in %v; want the 503 after one attempt, at once", resp, err, n, res, time.Since(start))
	}
}
