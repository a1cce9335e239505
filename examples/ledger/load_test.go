package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// load is the payments traffic of the test: workers that create charges,
// and refund half of them, each request retried with its idempotency key
// (the charge's header, the refund's fields) until it gets its 201,
// through server crashes and restarts.
type load struct {
	base     string
	run      string // unique per test run: in keys and accounts
	accounts []string
	pause    time.Duration

	stop    atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	charges map[string]string // key -> charge id
	refunds map[string]string // charge id -> refund id
	errs    []error
	retries atomic.Int64
	replays atomic.Int64
}

var loadClient = &http.Client{Timeout: 20 * time.Second}

func (l *load) start(workers int) {
	l.charges, l.refunds = map[string]string{}, map[string]string{}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; !l.stop.Load(); i++ {
				if err := l.one(w, i); err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
					return
				}
				time.Sleep(l.pause)
			}
		}()
	}
}

// finish stops the workers after their current charge (and refund) and
// returns what they created and their first errors.
func (l *load) finish() (charges, refunds int, errs []error) {
	l.stop.Store(true)
	l.wg.Wait()
	return len(l.charges), len(l.refunds), l.errs
}

// one creates a charge and, for every other one, a refund of half of it.
func (l *load) one(worker, i int) error {
	acct := l.accounts[(worker+i)%len(l.accounts)]
	key := fmt.Sprintf("%s-w%d-%d", l.run, worker, i)
	amount := 100 + rand.Int64N(10000)
	body := fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_%d"}`, amount, worker)
	var ch struct{ ID string }
	if err := l.post("/v1/charges", acct, key, body, &ch); err != nil {
		return fmt.Errorf("charge %s: %w", key, err)
	}
	l.mu.Lock()
	l.charges[key] = ch.ID
	l.mu.Unlock()
	if i%2 == 1 {
		return nil
	}
	var re struct{ ID string }
	if err := l.post("/v1/refunds", acct, "", fmt.Sprintf(`{"charge":%q,"amount":%d}`, ch.ID, amount/2), &re); err != nil {
		return fmt.Errorf("refund of %s: %w", ch.ID, err)
	}
	l.mu.Lock()
	l.refunds[ch.ID] = re.ID
	l.mu.Unlock()
	return nil
}

// post sends the request until it gets 201, for up to a minute: a refused
// connection or a reset (the server is down or died mid-request), a 5xx
// and a 409 (the key in progress) are retried with the same key and body.
func (l *load) post(path, acct, key, body string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last string
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			l.retries.Add(1)
			select {
			case <-ctx.Done():
				return fmt.Errorf("no 201 within a minute; last: %s", last)
			case <-time.After(time.Duration(50+rand.IntN(100)) * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, "POST", l.base+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+acct)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := loadClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			last = err.Error()
			continue
		case res.StatusCode == http.StatusCreated:
			if res.Header.Get("Idempotent-Replayed") == "true" {
				l.replays.Add(1)
			}
			return json.Unmarshal(b, out)
		case res.StatusCode == http.StatusConflict || res.StatusCode >= 500:
			last = fmt.Sprintf("%d %s", res.StatusCode, b)
			continue
		default:
			return fmt.Errorf("status %d: %s", res.StatusCode, b)
		}
	}
}
