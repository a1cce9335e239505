// Package idemclient is the client side of idemgen's idempotency contract:
// an http.RoundTripper that gives every request to an annotated operation
// an idempotency key and retries it, with the same key and the same bytes,
// until it gets an answer that is final.
//
// It is configured from the policies idemgen generates (the Policies()
// function of a generated package), so it knows which requests need a key
// (by method and route under the base paths, as the server's middleware
// matches them), where the key goes (header or query parameter), and, for
// operations whose key the server derives from the body's fields, the key
// the server will use.
//
//	policies := idem.Policies()
//	t, err := idemclient.New(idemclient.Options{}, policies...)
//	client := &http.Client{Transport: t}
//	var res idemclient.Result
//	req = req.WithContext(idemclient.WithResult(req.Context(), &res))
//	resp, err := client.Do(req) // res.Key, res.Attempts, res.Replayed
//
// What is retried (CONTRACT §3): transport errors (the connection reset,
// or the response lost after the server acted), 409 (a request with the
// key in progress, after its Retry-After), 503 (the key store unavailable;
// the handler did not run), 502, 504 and every other 5xx (the server
// releases the key, so the retry runs the operation again). 400, 401, 413
// and 422 are final, as is every other status, and 409 without Retry-After
// (a result too large to save: it will never be available). Retries wait
// an exponential backoff with full jitter, at least the Retry-After the
// server asked for, and stop when the next wait would end past
// Options.Budget or the request's context is done.
//
// Requests to other routes pass through unchanged. The package is
// standard library only (with the idemgen runtime, which is too).
package idemclient

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Options configure a Transport; the zero value is usable.
type Options struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// BasePaths, when non-nil, replaces the policies' base paths (the
	// server's Options.BasePaths, when it has one).
	BasePaths []string
	// MaxAttempts bounds the attempts of one request (default 6).
	MaxAttempts int
	// Budget bounds the time from the first attempt to the start of the
	// last one (default 30s): no retry is started after it.
	Budget time.Duration
	// BaseDelay and MaxDelay shape the backoff: the n-th retry waits a
	// random time in [0, min(MaxDelay, BaseDelay*2^(n-1))), or the
	// server's Retry-After when that is longer (defaults 100ms and 5s).
	BaseDelay, MaxDelay time.Duration
	// MaxBodyBytes bounds the request bodies the transport buffers to
	// resend (default 4 MiB, the server's default max-request-bytes); a
	// larger body is an error before anything is sent.
	MaxBodyBytes int64
	// NewKey makes a key for a request that has none; nil means 128
	// random bits, hex-encoded.
	NewKey func() string
}

// Result is what the transport did for one request: pass a pointer with
// WithResult to read it.
type Result struct {
	// Operation is the operation id of the matched policy ("" when the
	// request matched none and passed through).
	Operation string
	// Key is the idempotency key used: the caller's, the generated one,
	// or the one the server derives from the body's fields ("" for a
	// request without one).
	Key string
	// Attempts is the number of requests sent: every attempt written to a
	// connection, net/http's own retries included (http.Transport resends
	// a request that carries an Idempotency-Key header by itself when a
	// kept-alive connection fails under it), and at least one per attempt
	// of this transport (a Base that reports no httptrace events counts
	// one per call).
	Attempts int
	// Replayed reports that the final response is a replay of a saved
	// one (Idempotent-Replayed: true): the operation ran before.
	Replayed bool
}

type resultKey struct{}

// WithResult returns a context that makes the transport record its result
// for the request into res.
func WithResult(ctx context.Context, res *Result) context.Context {
	return context.WithValue(ctx, resultKey{}, res)
}

// Transport is the retrying http.RoundTripper.
type Transport struct {
	opts    Options
	matcher *idemrt.ClientMatcher
}

// New returns a transport for the operations of policies.
func New(opts Options, policies ...*idemrt.Policy) (*Transport, error) {
	m, err := idemrt.NewClientMatcher(opts.BasePaths, policies...)
	if err != nil {
		return nil, err
	}
	if opts.Base == nil {
		opts.Base = http.DefaultTransport
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 6
	}
	if opts.Budget <= 0 {
		opts.Budget = 30 * time.Second
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 100 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = idemrt.DefaultMaxRequestBytes
	}
	if opts.NewKey == nil {
		opts.NewKey = randomKey
	}
	return &Transport{opts: opts, matcher: m}, nil
}

// randomKey is 128 random bits in hex.
func randomKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// RoundTrip sends req, with a key and retries when it is a request to an
// annotated operation.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := t.matcher.Match(req.Method, req.URL.EscapedPath())
	if op == nil {
		return t.opts.Base.RoundTrip(req)
	}
	res, _ := req.Context().Value(resultKey{}).(*Result)
	if res == nil {
		res = &Result{}
	}
	*res = Result{Operation: op.Policy.OperationID}
	body, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	send := req.Clone(req.Context())
	res.Key = t.key(op, send, body)
	return t.retry(send, body, res)
}

// readBody reads and closes the request body (a RoundTripper must close it).
func (t *Transport) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(io.LimitReader(req.Body, t.opts.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("idemclient: reading the request body: %w", err)
	}
	if int64(len(b)) > t.opts.MaxBodyBytes {
		return nil, fmt.Errorf("idemclient: the request body is larger than MaxBodyBytes (%d)", t.opts.MaxBodyBytes)
	}
	return b, nil
}

// key returns the key of the request, setting a new one on send (a clone)
// when the caller set none.
func (t *Transport) key(op *idemrt.ClientOperation, send *http.Request, body []byte) string {
	switch op.Policy.Key {
	case 0, idemrt.KeyFromHeader, idemrt.KeyFromQuery:
		// The caller's key, read as the server reads it.
		if k, n := op.SentKey(send.Header, send.URL.RawQuery); n > 0 && k != "" {
			return k
		}
		k := t.opts.NewKey()
		if op.Policy.Key != idemrt.KeyFromQuery {
			send.Header.Set(op.KeyName, k)
			return k
		}
		u := *send.URL
		sep := "&"
		if u.RawQuery == "" {
			sep = ""
		}
		u.RawQuery += sep + queryEscape(op.KeyName) + "=" + queryEscape(k)
		send.URL = &u
		return k
	}
	// Read with the request's header, as the middleware reads it: a
	// Content-Encoding makes the body count as raw bytes.
	k, _ := op.DerivedKeyOf(send.Header, send.URL.RawQuery, body)
	return k
}

func queryEscape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// retry sends the attempts.
func (t *Transport) retry(send *http.Request, body []byte, res *Result) (*http.Response, error) {
	ctx := send.Context()
	start := time.Now()
	for n := 1; ; n++ {
		attempt := send.Clone(ctx)
		if body != nil {
			attempt.Body = io.NopCloser(bytes.NewReader(body))
			attempt.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			attempt.ContentLength = int64(len(body))
		}
		resp, err := t.send(attempt, res)
		if err == nil && !retryable(resp) {
			res.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
			return resp, nil
		}
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, ctx.Err()
		}
		wait := t.backoff(n, resp)
		if n >= t.opts.MaxAttempts || time.Since(start)+wait > t.opts.Budget {
			if err != nil {
				return nil, fmt.Errorf("idemclient: %d attempts with key %q: %w", n, res.Key, err)
			}
			return resp, nil // the last answer, for the caller to read
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// send sends one attempt, counting in res.Attempts every time it was
// written to a connection (through httptrace, which composes with the
// caller's own trace in the context).
func (t *Transport) send(attempt *http.Request, res *Result) (*http.Response, error) {
	var wrote atomic.Int64
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) }}
	attempt = attempt.WithContext(httptrace.WithClientTrace(attempt.Context(), trace))
	resp, err := t.opts.Base.RoundTrip(attempt)
	res.Attempts += int(max(wrote.Load(), 1))
	return resp, err
}

// retryable reports whether a response is worth another attempt with the
// same key.
func retryable(resp *http.Response) bool {
	switch c := resp.StatusCode; {
	case c == http.StatusConflict:
		// In progress: Retry-After says when. Without it, the result was
		// too large to save and will never be available.
		return resp.Header.Get("Retry-After") != ""
	case c >= 500 && c <= 599:
		return true
	}
	return false
}

// backoff is the wait before attempt n+1: full jitter over an exponential
// ceiling, or the response's Retry-After when that is longer.
func (t *Transport) backoff(n int, resp *http.Response) time.Duration {
	ceiling := t.opts.MaxDelay
	if shift := n - 1; shift < 30 {
		if d := t.opts.BaseDelay << shift; d > 0 && d < ceiling {
			ceiling = d
		}
	}
	wait := time.Duration(rand.Int64N(int64(ceiling)))
	if resp != nil {
		if ra := retryAfter(resp.Header.Get("Retry-After")); ra > wait {
			wait = ra
		}
	}
	return wait
}

// maxRetryAfter bounds the wait a Retry-After asks for: far past any
// budget, and far from overflowing when added to the time spent.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// retryAfter parses Retry-After: delay-seconds or an HTTP date. A wait
// longer than maxRetryAfter (a delay too large for a time.Duration, or a
// date centuries ahead, for which time.Until saturates) is maxRetryAfter,
// so that adding the time spent to it cannot wrap around to a negative
// total that passes the budget check.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || s > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(s) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(at), 0), maxRetryAfter)
	}
	return 0
}
