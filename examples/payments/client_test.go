package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/client/idemclient"
	"github.com/idemgen/idemgen/examples/payments/internal/idemsqlite"
)

// The retrying client (client/idemclient) against the example server over
// real TCP, through a proxy that breaks the first connections: one is
// reset in the middle of the request (the server never sees it whole), one
// loses the response after the server acted (the charge is committed). The
// client must still return the charge, and exactly one charge must exist.

// fault is what the proxy does to one connection.
type fault int

const (
	pass         fault = iota
	resetMidway        // forward part of the request, then reset both sides
	dropResponse       // forward the request, wait for the response to start, then close without forwarding it
)

// faultyProxy forwards TCP connections to target, applying plan[i] to the
// i-th connection (pass after the plan).
type faultyProxy struct {
	ln     net.Listener
	target string
	plan   []fault
	n      atomic.Int32
	wg     sync.WaitGroup
}

func newFaultyProxy(t *testing.T, target string, plan ...fault) *faultyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{ln: ln, target: target, plan: plan}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *faultyProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		f := pass
		if i := int(p.n.Add(1)) - 1; i < len(p.plan) {
			f = p.plan[i]
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c.(*net.TCPConn), f)
		}()
	}
}

func (p *faultyProxy) handle(client *net.TCPConn, f fault) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	switch f {
	case resetMidway:
		buf := make([]byte, 32)
		n, _ := io.ReadAtLeast(client, buf, len(buf))
		_, _ = server.Write(buf[:n])
		_ = client.SetLinger(0) // RST, not FIN
		return
	case dropResponse:
		go func() { _, _ = io.Copy(server, client) }()
		one := make([]byte, 1)
		_, _ = io.ReadFull(server, one) // the server answered: it acted
		_ = client.SetLinger(0)
		return
	}
	go func() { _, _ = io.Copy(server, client); server.(*net.TCPConn).CloseWrite() }()
	_, _ = io.Copy(client, server)
}

func TestClientRetriesThroughBrokenConnections(t *testing.T) {
	srv, _, _ := newTestApp(t)
	target := strings.TrimPrefix(srv.URL, "http://")
	proxy := newFaultyProxy(t, target, resetMidway, dropResponse)

	// A fresh connection per attempt, so that the proxy's plan maps to the
	// attempts (and net/http's own retry of a reused connection stays out).
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	tr, err := idemclient.New(idemclient.Options{Base: base, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}, idemsqlite.Policies()...)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	u := "http://" + proxy.ln.Addr().String()

	var res idemclient.Result
	ctx := idemclient.WithResult(context.Background(), &res)
	req, _ := http.NewRequestWithContext(ctx, "POST", u+"/v1/charges", strings.NewReader(`{"amount":1500,"currency":"eur","customer":"cus_1"}`))
	req.Header.Set("Authorization", "Bearer acct_client")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the client gave up: %v (result %+v)", err, res)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var charge Charge
	if err := json.Unmarshal(body, &charge); err != nil || charge.ID == "" || charge.Amount != 1500 {
		t.Fatalf("not a charge: %s (%v)", body, err)
	}
	if res.Attempts != 3 || !res.Replayed || len(res.Key) != 32 || res.Operation != "createCharge" {
		t.Errorf("result %+v, want 3 attempts (reset, lost response, replay), replayed, a 32-hex-digit key, createCharge", res)
	}
	if got := proxy.n.Load(); got != 3 {
		t.Errorf("the proxy saw %d connections, want 3", got)
	}

	// Exactly one charge exists, and it is the one the client returned.
	list, _ := http.NewRequest("GET", srv.URL+"/v1/charges", nil)
	list.Header.Set("Authorization", "Bearer acct_client")
	lr, err := http.DefaultClient.Do(list)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Body.Close()
	var charges struct{ Data []Charge }
	if err := json.NewDecoder(lr.Body).Decode(&charges); err != nil {
		t.Fatal(err)
	}
	if len(charges.Data) != 1 || charges.Data[0].ID != charge.ID {
		t.Fatalf("charges %+v, want exactly the one returned (%s)", charges.Data, charge.ID)
	}
}

// A refund is keyed by its fields: the client sends no key, reports the
// key the server derived, and a retry after a lost response is a replay.
func TestClientFieldsKeyedRefund(t *testing.T) {
	srv, _, _ := newTestApp(t)
	auth := "Bearer acct_refund"
	cr, created := post(t, srv, "acct_refund", "/v1/charges", "charge-for-refund", `{"amount":900,"currency":"eur","customer":"cus_2"}`)
	var charge Charge
	if err := json.Unmarshal([]byte(created), &charge); cr.StatusCode != http.StatusCreated || err != nil {
		t.Fatalf("charge: %d %s (%v)", cr.StatusCode, created, err)
	}

	proxy := newFaultyProxy(t, strings.TrimPrefix(srv.URL, "http://"), dropResponse)
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	tr, err := idemclient.New(idemclient.Options{Base: base, BaseDelay: time.Millisecond}, idemsqlite.Policies()...)
	if err != nil {
		t.Fatal(err)
	}
	var res idemclient.Result
	body := `{"charge":` + strconvQuote(charge.ID) + `,"amount":300}`
	req, _ := http.NewRequestWithContext(idemclient.WithResult(context.Background(), &res), "POST", "http://"+proxy.ln.Addr().String()+"/v1/refunds", strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || res.Attempts != 2 || !res.Replayed {
		t.Fatalf("status %d, result %+v; want 201 replayed on the second attempt", resp.StatusCode, res)
	}
	if want := "createRefund:" + strconvQuote(charge.ID) + ",300"; res.Key != want {
		t.Errorf("key %q, want the server's derivation %q", res.Key, want)
	}
	if resp.Request.Header.Get("Idempotency-Key") != "" {
		t.Errorf("the client sent a key header to a fields-keyed operation")
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
