package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

type reply struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, key, body string) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: post also runs on other goroutines
		return reply{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, string(b)}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return strings.TrimSpace(string(b))
}

func newTestServer(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	h, err := newApp(idemrt.NewMemoryStore(), slog.New(slog.DiscardHandler), delay)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestWrappedRoutesReplayOthersUntouched(t *testing.T) {
	srv := newTestServer(t, 0)
	a := post(t, srv.URL+"/todos", "k1", `{"title":"milk"}`)
	b := post(t, srv.URL+"/todos", "k1", `{"title":"milk"}`)
	if a.status != 201 || b.status != 201 || a.body != b.body {
		t.Fatalf("create then retry: %d %q / %d %q", a.status, a.body, b.status, b.body)
	}
	if b.header.Get("Idempotent-Replayed") != "true" || b.header.Get("Location") != "/todos/1" {
		t.Errorf("retry headers: %v", b.header)
	}
	if c := post(t, srv.URL+"/todos", "", `{"title":"milk"}`); c.status != 400 {
		t.Errorf("no key: %d, want 400", c.status)
	}
	if c := post(t, srv.URL+"/todos", "k1", `{"title":"eggs"}`); c.status != 422 {
		t.Errorf("same key, other title: %d, want 422", c.status)
	}

	// The query-parameter key on a route with a path parameter.
	r1 := post(t, srv.URL+"/todos/1/remind?request_id=cron-2026-11-30", "", "")
	r2 := post(t, srv.URL+"/todos/1/remind?request_id=cron-2026-11-30", "", "")
	if r1.status != 200 || r1.body != r2.body || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("reminder and its retry: %d %q / %d %q", r1.status, r1.body, r2.status, r2.body)
	}
	if r := post(t, srv.URL+"/todos/1/remind", "", ""); r.status != 400 {
		t.Errorf("reminder without request_id: %d, want 400", r.status)
	}
	if got := get(t, srv.URL+"/stats"); got != `{"todos":1,"reminders":1}` {
		t.Errorf("stats = %s, want one todo and one reminder", got)
	}
	// The unwrapped GET is served as before.
	if got := get(t, srv.URL+"/todos"); got != `[{"id":1,"title":"milk"}]` {
		t.Errorf("GET /todos = %s", got)
	}
}

// With wait, duplicates that arrive while the first attempt runs get its
// response instead of 409.
func TestWaitTurnsConcurrentDuplicatesIntoReplays(t *testing.T) {
	srv := newTestServer(t, 300*time.Millisecond)
	const n = 20
	var wg sync.WaitGroup
	replies := make([]reply, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = post(t, srv.URL+"/todos", "same", `{"title":"bread"}`)
		}()
	}
	wg.Wait()
	replayed := 0
	for i, r := range replies {
		if r.status != 201 || !bytes.Equal([]byte(r.body), []byte(replies[0].body)) {
			t.Errorf("reply %d: %d %q, want 201 %q", i, r.status, r.body, replies[0].body)
		}
		if r.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	if replayed != n-1 {
		t.Errorf("%d replays, want %d (one request ran)", replayed, n-1)
	}
	if got := get(t, srv.URL+"/stats"); got != `{"todos":1,"reminders":0}` {
		t.Errorf("stats = %s, want one todo", got)
	}
}
