package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The end-to-end tests build the example binary, start it as a user would,
// and talk to it over real HTTP.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds the example once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "payments-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "payments")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one running payments process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	err  error
}

var listenRE = regexp.MustCompile(`msg="payments listening" addr=(\S+)`)

// start runs the binary on a free port and waits until it serves.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "PAYMENTS_DSN=", "PAYMENTS_WEBHOOK_SECRET="+testWebhookSecret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if strings.Contains(p.log(), "WARNING: DATA RACE") {
			t.Error("the race detector fired in the payments server")
		}
		if t.Failed() {
			t.Logf("server log (%v):\n%s", args, p.log())
		}
	})
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-p.done:
		t.Fatalf("payments exited before serving: %v\n%s", p.err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("payments did not start serving in 30s\n%s", p.log())
	}
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

// stop asks for a graceful shutdown and checks it exits 0.
func (p *proc) stop() {
	p.t.Helper()
	client.CloseIdleConnections() // else the server waits for dialled, unused connections
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("payments did not shut down within 20s after SIGINT")
	}
	if p.err != nil {
		p.t.Fatalf("payments exited with %v after SIGINT\n%s", p.err, p.log())
	}
}

// waitLog waits until the server logged a line matching re.
func (p *proc) waitLog(re *regexp.Regexp, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if re.MatchString(p.log()) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("no log line matching %s within %v\n%s", re, within, p.log())
}

type response struct {
	status int
	header http.Header
	body   []byte
}

var client = &http.Client{Timeout: 60 * time.Second}

// call sends one request. token is the bearer token (the merchant account),
// key the Idempotency-Key; empty strings leave the header out.
func (p *proc) call(method, path, token, key, body string, headers ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}, err
}

func (p *proc) mustCall(method, path, token, key, body string, headers ...string) response {
	p.t.Helper()
	r, err := p.call(method, path, token, key, body, headers...)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func expect(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
}

// testWebhookSecret is the secret the test servers share with the tests,
// which sign webhook deliveries as the provider would.
const testWebhookSecret = "whsec_e2e_test"

// deliver posts a webhook event signed with the test secret at time at.
func (p *proc) deliver(event string, at time.Time) response {
	p.t.Helper()
	return p.mustCall("POST", webhookPath, "", "", event, signatureHeader+": "+signHeader([]byte(testWebhookSecret), at, []byte(event)))
}

// events counts how often the webhook recorded the event id.
func (p *proc) events(id string) int {
	p.t.Helper()
	r := p.mustCall("GET", webhookPath+"?limit=10000", "", "", "")
	expect(p.t, "list events", r, 200)
	var list struct{ Data []Event }
	if err := json.Unmarshal(r.body, &list); err != nil {
		p.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Data {
		if e.ID == id {
			n++
		}
	}
	return n
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// charges lists the account's charges (up to 10,000, newest first).
func (p *proc) charges(token string) []Charge {
	p.t.Helper()
	r := p.mustCall("GET", "/v1/charges?limit=10000", token, "", "")
	expect(p.t, "GET /v1/charges", r, 200)
	var list struct {
		Object string   `json:"object"`
		Data   []Charge `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		p.t.Fatalf("GET /v1/charges: %v: %s", err, r.body)
	}
	return list.Data
}

const chargeBody = `{"amount":2000,"currency":"usd","customer":"cus_42","description":"e2e"}`

// scenario runs every end-to-end check against servers started with args.
func scenario(t *testing.T, args ...string) {
	p := start(t, args...)
	sqlite := !slices.Contains(args, "-dsn")

	t.Run("first call then retry replays byte-identical", func(t *testing.T) {
		acct, key := "acct_"+randHex(4), "key-"+randHex(8)
		first := p.mustCall("POST", "/v1/charges", acct, key, chargeBody)
		expect(t, "first call", first, 201)
		if v := first.header.Get("Idempotent-Replayed"); v != "" {
			t.Errorf("first call has Idempotent-Replayed: %q", v)
		}
		retry := p.mustCall("POST", "/v1/charges", acct, key, chargeBody)
		expect(t, "retry", retry, 201)
		if !bytes.Equal(first.body, retry.body) {
			t.Errorf("retry body differs:\nfirst %s\nretry %s", first.body, retry.body)
		}
		if v := retry.header.Get("Idempotent-Replayed"); v != "true" {
			t.Errorf("retry Idempotent-Replayed = %q, want true", v)
		}
		if a, b := first.header.Get("Location"), retry.header.Get("Location"); a == "" || a != b {
			t.Errorf("Location: first %q, retry %q", a, b)
		}
		if n := len(p.charges(acct)); n != 1 {
			t.Errorf("%d charges after a call and its retry, want 1", n)
		}
		// Another merchant with the same key is a different key space.
		other := p.mustCall("POST", "/v1/charges", acct+"_other", key, chargeBody)
		expect(t, "same key, other account", other, 201)
		if other.header.Get("Idempotent-Replayed") != "" || bytes.Equal(other.body, first.body) {
			t.Errorf("another account's request was answered from the first account's record: %s", other.body)
		}
		p.waitLog(regexp.MustCompile(`path=/v1/charges status=201 .*replayed=true`), 5*time.Second)
	})

	t.Run("100 concurrent identical calls make one charge", func(t *testing.T) {
		acct, key := "acct_"+randHex(4), "key-"+randHex(8)
		const n = 100
		var wg sync.WaitGroup
		results := make([]response, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = p.call("POST", "/v1/charges", acct, key, chargeBody)
			}()
		}
		close(start)
		wg.Wait()
		var created, conflicts int
		var body []byte
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			switch r.status {
			case 201:
				created++
				if body == nil {
					body = r.body
				} else if !bytes.Equal(body, r.body) {
					t.Errorf("two different 201 bodies for one key:\n%s\n%s", body, r.body)
				}
			case 409:
				conflicts++
				if r.header.Get("Retry-After") == "" {
					t.Errorf("409 without Retry-After")
				}
			default:
				t.Errorf("call %d: status %d: %s", i, r.status, r.body)
			}
		}
		if created == 0 {
			t.Fatalf("no call got 201 (%d conflicts)", conflicts)
		}
		if got := p.charges(acct); len(got) != 1 {
			t.Fatalf("%d charges after 100 identical calls, want exactly 1", len(got))
		}
		t.Logf("100 concurrent calls: %d got 201 (1 ran, the rest replayed), %d got 409 in progress", created, conflicts)
	})

	t.Run("200 concurrent new keys: 200 charges, none refused", func(t *testing.T) {
		// Each request claims a key and opens a transaction: an unbounded
		// pool opened a connection per request and MariaDB refused the
		// ones past its max_connections (503). On PostgreSQL and MySQL none
		// may be refused.
		acct := "acct_" + randHex(4)
		const n = 200
		var wg sync.WaitGroup
		results := make([]response, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = p.call("POST", "/v1/charges", acct, fmt.Sprintf("new-%d", i), chargeBody)
			}()
		}
		close(start)
		wg.Wait()
		if sqlite {
			// SQLite has one writer: under 200 concurrent writers a claim
			// can wait past the store bound (half the 10s lease) for the
			// write lock, and is then refused with 503 before the handler
			// ran (fail closed). A client retries those with the same key;
			// each must then run exactly once.
			retried := 0
			for i := range results {
				for try := 0; errs[i] == nil && results[i].status == 503 && try < 5; try++ {
					retried++
					results[i], errs[i] = p.call("POST", "/v1/charges", acct, fmt.Sprintf("new-%d", i), chargeBody)
				}
			}
			t.Logf("SQLite: %d calls were refused with 503 past the store bound and retried", retried)
		}
		ids := map[string]bool{}
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			if r.status != 201 {
				t.Errorf("call %d: status %d: %s", i, r.status, r.body)
				continue
			}
			var c Charge
			json.Unmarshal(r.body, &c)
			ids[c.ID] = true
		}
		got := p.charges(acct)
		if len(ids) != n || len(got) != n {
			t.Fatalf("%d distinct charges answered and %d stored for %d new keys, want %d and %d", len(ids), len(got), n, n, n)
		}
		for _, c := range got {
			if !ids[c.ID] {
				t.Errorf("stored charge %s was not answered to any call", c.ID)
			}
		}
	})

	t.Run("same key with a different amount is 422", func(t *testing.T) {
		acct, key := "acct_"+randHex(4), "key-"+randHex(8)
		expect(t, "first", p.mustCall("POST", "/v1/charges", acct, key, chargeBody), 201)
		r := p.mustCall("POST", "/v1/charges", acct, key, strings.Replace(chargeBody, "2000", "2001", 1))
		expect(t, "different amount", r, 422)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("422 Content-Type = %q", ct)
		}
		if n := len(p.charges(acct)); n != 1 {
			t.Errorf("%d charges, want 1", n)
		}
	})

	t.Run("no key is 400", func(t *testing.T) {
		acct := "acct_" + randHex(4)
		r := p.mustCall("POST", "/v1/charges", acct, "", chargeBody)
		expect(t, "no key", r, 400)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("400 Content-Type = %q", ct)
		}
		if n := len(p.charges(acct)); n != 0 {
			t.Errorf("%d charges after a request without a key, want 0", n)
		}
	})

	t.Run("webhook delivered three times records one event", func(t *testing.T) {
		id := "evt_" + randHex(8)
		ev := `{"id":"` + id + `","type":"charge.succeeded","data":{"charge":"ch_x"}}`
		var bodies [][]byte
		for i := range 3 {
			// The provider signs each delivery anew.
			r := p.deliver(ev, time.Now().Add(time.Duration(-i)*time.Second))
			expect(t, fmt.Sprintf("delivery %d", i+1), r, 200)
			bodies = append(bodies, r.body)
		}
		if !bytes.Equal(bodies[0], bodies[1]) || !bytes.Equal(bodies[0], bodies[2]) {
			t.Errorf("deliveries answered differently: %q", bodies)
		}
		if n := p.events(id); n != 1 {
			t.Errorf("event %s recorded %d times, want 1", id, n)
		}
	})

	t.Run("webhook posts the provider did not sign claim nothing", func(t *testing.T) {
		id := "evt_" + randHex(8)
		ev := `{"id":"` + id + `","type":"charge.succeeded","data":{"charge":"ch_x"}}`
		forged := `{"id":"` + id + `","type":"charge.refunded"}`
		now := time.Now()
		for _, c := range []struct{ what, body, sig string }{
			{"unsigned", forged, ""},
			{"signed with another secret", forged, signHeader([]byte("whsec_guess"), now, []byte(forged))},
			{"the real signature on another body", forged, signHeader([]byte(testWebhookSecret), now, []byte(ev))},
			{"an old signature replayed", ev, signHeader([]byte(testWebhookSecret), now.Add(-time.Hour), []byte(ev))},
			{"malformed", forged, "t=,v1=zz"},
		} {
			r := p.mustCall("POST", webhookPath, "", "", c.body, signatureHeader+": "+c.sig)
			expect(t, c.what, r, 401)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("%s: Content-Type %q", c.what, ct)
			}
		}
		if n := p.events(id); n != 0 {
			t.Fatalf("event %s recorded %d times after refused posts, want 0", id, n)
		}
		r := p.deliver(ev, now)
		expect(t, "the provider's delivery after the forgeries", r, 200)
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("the provider's delivery was answered from a forged post's record: %s", r.body)
		}
		if n := p.events(id); n != 1 {
			t.Errorf("event %s recorded %d times, want 1", id, n)
		}
	})

	t.Run("refund keyed by charge and amount runs once", func(t *testing.T) {
		acct := "acct_" + randHex(4)
		r := p.mustCall("POST", "/v1/charges", acct, "key-"+randHex(8), chargeBody)
		expect(t, "charge", r, 201)
		var ch Charge
		json.Unmarshal(r.body, &ch)
		refund := `{"charge":"` + ch.ID + `","amount":500}`
		a := p.mustCall("POST", "/v1/refunds", acct, "", refund)
		expect(t, "refund", a, 201)
		b := p.mustCall("POST", "/v1/refunds", acct, "", refund)
		expect(t, "refund again", b, 201)
		if !bytes.Equal(a.body, b.body) || b.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("second identical refund was not a replay: %s / %s", a.body, b.body)
		}
		got := p.mustCall("GET", "/v1/charges/"+ch.ID, acct, "", "")
		expect(t, "get charge", got, 200)
		json.Unmarshal(got.body, &ch)
		if ch.AmountRefunded != 500 {
			t.Errorf("amount_refunded = %d after the same refund twice, want 500", ch.AmountRefunded)
		}
		expect(t, "refund of an unknown charge", p.mustCall("POST", "/v1/refunds", acct, "", `{"charge":"ch_nope","amount":1}`), 404)
	})

	t.Run("PUT and DELETE are naturally idempotent", func(t *testing.T) {
		acct := "acct_" + randHex(4)
		cust := `{"name":"Ada","email":"ada@example.com"}`
		a := p.mustCall("PUT", "/v1/customers/cus_1", acct, "", cust)
		b := p.mustCall("PUT", "/v1/customers/cus_1", acct, "", cust)
		expect(t, "put customer", a, 200)
		expect(t, "put customer again", b, 200)
		if !bytes.Equal(a.body, b.body) {
			t.Errorf("PUT twice answered differently: %s / %s", a.body, b.body)
		}
		expect(t, "put order", p.mustCall("PUT", "/v1/orders/ord_1", acct, "", `{"customer":"cus_1","amount":100,"currency":"eur"}`), 200)
		expect(t, "delete order", p.mustCall("DELETE", "/v1/orders/ord_1", acct, "", ""), 204)
		expect(t, "delete order again", p.mustCall("DELETE", "/v1/orders/ord_1", acct, "", ""), 204)
		expect(t, "delete an order that never existed", p.mustCall("DELETE", "/v1/orders/ord_never", acct, "", ""), 404)
	})

	t.Run("list is newest first and limited to 10000", func(t *testing.T) {
		acct := "acct_" + randHex(4)
		var ids []string
		for i := range 3 {
			r := p.mustCall("POST", "/v1/charges", acct, fmt.Sprintf("list-%d", i), chargeBody)
			expect(t, "charge", r, 201)
			var c Charge
			json.Unmarshal(r.body, &c)
			ids = append(ids, c.ID)
		}
		got := p.charges(acct)
		if len(got) != 3 || got[0].ID != ids[2] || got[2].ID != ids[0] {
			t.Errorf("list order: got %v, want newest first of %v", got, ids)
		}
		expect(t, "limit 10001", p.mustCall("GET", "/v1/charges?limit=10001", acct, "", ""), 400)
		expect(t, "no bearer", p.mustCall("GET", "/v1/charges", "", "", ""), 401)
	})

	t.Run("graceful shutdown", func(t *testing.T) { p.stop() })

	t.Run("kill -9 during a slow charge, restart, retry: one charge", func(t *testing.T) {
		acct, key := "acct_"+randHex(4), "key-"+randHex(8)
		slow := start(t, append([]string{"-charge-delay", "1m"}, args...)...)
		inflight := make(chan error, 1)
		go func() {
			_, err := slow.call("POST", "/v1/charges", acct, key, chargeBody)
			inflight <- err
		}()
		slow.waitLog(regexp.MustCompile(`msg="charge delayed \(test hook\)"`), 20*time.Second)
		slow.kill()
		if err := <-inflight; err == nil {
			t.Fatal("the in-flight charge got a response from a killed server")
		}

		q := start(t, args...)
		if n := len(q.charges(acct)); n != 0 {
			t.Fatalf("%d charges visible after the crash, want 0 (the charge's transaction must roll back)", n)
		}
		// createCharge is transactional: the key's record was in the dead
		// attempt's transaction, which rolled back with it, so the retry
		// runs at once (no lease to wait out).
		r := q.mustCall("POST", "/v1/charges", acct, key, chargeBody)
		expect(t, "retry right after the crash", r, 201)
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Error("the retry was answered as a replay")
		}
		again := q.mustCall("POST", "/v1/charges", acct, key, chargeBody)
		expect(t, "second retry", again, 201)
		if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, r.body) {
			t.Errorf("second retry was not a replay of the first")
		}
		if got := q.charges(acct); len(got) != 1 {
			t.Fatalf("%d charges after crash and retries, want exactly 1", len(got))
		}
		q.stop()
	})
}

func TestEndToEndSQLite(t *testing.T) {
	t.Parallel()
	scenario(t, "-db", filepath.Join(t.TempDir(), "payments.db"))
}

// A client that sends its headers or body a byte at a time, or keeps an
// idle connection, is disconnected by the server's timeouts (short ones
// here) instead of holding the connection for as long as it trickles.
func TestSlowClientsAreDisconnected(t *testing.T) {
	t.Parallel()
	p := start(t, "-db", filepath.Join(t.TempDir(), "payments.db"),
		"-read-header-timeout", "500ms", "-read-timeout", "1s", "-idle-timeout", "1s")
	addr := strings.TrimPrefix(p.base, "http://")
	body := chargeBody + strings.Repeat(" ", 200) // 20s of trickling
	for _, c := range []struct{ what, sent, trickled string }{
		{"headers", "POST /v1/charges HTTP/1.1\r\nHost: x\r\n", "X-Slow: " + strings.Repeat("a", len(body))},
		{"body", "POST /v1/charges HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer acct_slow\r\nIdempotency-Key: slow\r\n" +
			"Content-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n", body},
		{"idle after a request", "GET /webhooks/payment-events HTTP/1.1\r\nHost: x\r\n\r\n", ""},
	} {
		t.Run(c.what, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			closed := make(chan struct{})
			go func() { io.Copy(io.Discard, conn); close(closed) }()
			if _, err := io.WriteString(conn, c.sent); err != nil {
				t.Fatal(err)
			}
			// One byte per 100ms, for 20s.
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := 0; i < 200; i++ {
				select {
				case <-closed:
					return
				case <-tick.C:
				}
				if i < len(c.trickled) {
					if _, err := io.WriteString(conn, c.trickled[i:i+1]); err != nil {
						return // closed by the server
					}
				}
			}
			t.Fatalf("the connection was still open after 20s of trickling %s", c.what)
		})
	}
}

func TestEndToEndPostgres(t *testing.T) {
	t.Parallel()
	base := testutil.PostgresDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	name := "payments_e2e_" + randHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	scenario(t, "-dsn", u.String())
}

func TestEndToEndMySQL(t *testing.T) {
	t.Parallel()
	base := testutil.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	name := "payments_e2e_" + randHex(6)
	db := openMySQLAdmin(t, cfg)
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	scenario(t, "-dsn", "mysql://"+cfg.FormatDSN())
}

func openMySQLAdmin(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("mysql %s: %v", cfg.Addr, err)
	}
	return db
}
