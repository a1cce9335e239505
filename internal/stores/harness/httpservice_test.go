package harness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// memBackend is an HTTPBackend over the memory store and a map.
func memBackend() HTTPBackend {
	var mu sync.Mutex
	rows := map[string][]byte{}
	type saved struct {
		v       []byte
		expires time.Time
	}
	saves := map[string]saved{}
	return HTTPBackend{
		Store: idemrt.NewMemoryStore(),
		Insert: func(_ context.Context, id string, body []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := rows[id]; ok {
				return errors.New("duplicate key")
			}
			rows[id] = body
			return nil
		},
		Get: func(_ context.Context, id string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			if b, ok := rows[id]; ok {
				return b, nil
			}
			return nil, errors.New("no row")
		},
		Save: func(_ context.Context, id string, v []byte, expires time.Time) error {
			mu.Lock()
			defer mu.Unlock()
			saves[id] = saved{v, expires}
			return nil
		},
		GetSaved: func(_ context.Context, id string, now time.Time) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			if s, ok := saves[id]; ok && s.expires.After(now) {
				return s.v, nil
			}
			return nil, errors.New("no saved row")
		},
	}
}

// TestHTTPServiceCounts: each case's requests, built by Request, get the
// case's status, and its route's counts pass Check; the same counts fail
// Check for a case that expects the other path (a replay counted as a new
// key, a new key as a replay), and an error answer is counted with a
// sample of its body.
func TestHTTPServiceCounts(t *testing.T) {
	svc, err := NewHTTPService(memBackend(), StoreFloors(memBackend()))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	cases := map[string]HTTPCase{}
	for _, c := range svc.Cases {
		cases[c.Name] = c
		before := svc.Stats().Routes[c.Route()]
		const n = 5
		for i := range int64(n) {
			req, err := svc.Request(srv.URL, c, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := do(srv.Client(), req, c.Status); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
		}
		d := svc.Stats().Routes[c.Route()].Sub(before)
		if err := c.Check(d, n, 1); err != nil {
			t.Error(err)
		}
		if d.Requests != n {
			t.Errorf("%s: %d requests counted, want %d", c.Name, d.Requests, n)
		}
	}
	for _, name := range []string{"store-nontx", "floor-replay"} {
		if _, ok := cases[name]; !ok {
			t.Errorf("no %s floor case", name)
		}
	}
	replay := RouteStats{Requests: 3, Replayed: 3, Statuses: map[int]int64{201: 3}}
	if err := cases["newkey"].Check(replay, 3, 1); err == nil || !strings.Contains(err.Error(), "want none") {
		t.Errorf("replays checked as new keys: %v", err)
	}
	fresh := RouteStats{Requests: 3, Runs: 3, Statuses: map[int]int64{201: 3}}
	if err := cases["replay"].Check(fresh, 3, 1); err == nil || !strings.Contains(err.Error(), "want all") {
		t.Errorf("new keys checked as replays: %v", err)
	}
	if err := cases["newkey"].Check(fresh, 3, 1); err != nil {
		t.Errorf("new keys checked as new keys: %v", err)
	}
	// A replay of a seeded key with another body: 422, counted with its body.
	before := svc.Stats().Routes["/charges"]
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":5}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", svc.ReplayKeyOf(0))
	if err := do(srv.Client(), req, http.StatusUnprocessableEntity); err != nil {
		t.Fatal(err)
	}
	d := svc.Stats().Routes["/charges"].Sub(before)
	err = cases["replay"].Check(d, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "status 422") || !strings.Contains(err.Error(), "fingerprint-mismatch") {
		t.Errorf("a 422 checked as a replay: %v", err)
	}
	// The replay floor refuses another body with the same key too: it does
	// the digest's work, not only the read.
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/floor-replay", strings.NewReader(`{"amount":5}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", svc.RowID(0))
	if err := do(srv.Client(), req, http.StatusUnprocessableEntity); err != nil {
		t.Errorf("floor-replay with another body: %v", err)
	}
}

// TestSavedRowPacking: the replay floor reads back every field it saved,
// and refuses a row too short for its own Content-Type.
func TestSavedRowPacking(t *testing.T) {
	row := SavedRow{Fingerprint: [32]byte{7, 31: 9}, Status: 599, ContentType: "text/plain; charset=utf-8", Body: []byte("ok")}
	got, err := unpackSaved(row.Pack())
	if err != nil || got.Fingerprint != row.Fingerprint || got.Status != row.Status || got.ContentType != row.ContentType || string(got.Body) != "ok" {
		t.Errorf("unpack(pack(%+v)) = %+v, %v", row, got, err)
	}
	if _, err := unpackSaved(row.Pack()[:40]); err == nil {
		t.Error("a truncated row unpacked")
	}
}

// TestHTTPServiceOpen: a connection counts in Open from its accept to its
// close, whether it is sending a request, idle between two, or has a
// request the server has not read.
func TestHTTPServiceOpen(t *testing.T) {
	svc, err := NewHTTPService(memBackend(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(svc)
	srv.Config.ConnState = svc.ConnState
	srv.Start()
	defer srv.Close()
	open := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			st := svc.Stats()
			if st.Open == want && st.InFlight == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("open %d, in flight %d; want open %d, none in flight", st.Open, st.InFlight, want)
			}
		}
	}
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	open(1)
	if _, err := c.Write([]byte("POST /noop HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	open(1)
	if _, err := c.Write([]byte("Content-Length: 0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	open(1) // idle, kept alive
	c.Close()
	open(0)
}

// TestHTTPServiceSavedPair: a backend with only one of Save and GetSaved
// is refused, rather than run without floor-replay.
func TestHTTPServiceSavedPair(t *testing.T) {
	onlySave, onlyGet := memBackend(), memBackend()
	onlySave.GetSaved, onlyGet.Save = nil, nil
	for name, hb := range map[string]HTTPBackend{"Save alone": onlySave, "GetSaved alone": onlyGet} {
		if _, err := NewHTTPService(hb, nil); err == nil {
			t.Errorf("%s: NewHTTPService accepted it", name)
		}
	}
	neither := memBackend()
	neither.Save, neither.GetSaved = nil, nil
	svc, err := NewHTTPService(neither, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range svc.Cases {
		if c.Name == "floor-replay" {
			t.Error("a backend without the saved table has the floor-replay case")
		}
	}
}
