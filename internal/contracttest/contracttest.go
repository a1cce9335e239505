// Package contracttest holds what tests of whole servers share (the
// framework adapters, the examples): JSON requests over real HTTP and
// checks of the idempotency contract's responses.
package contracttest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Response is what a client received.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Post sends a JSON POST to url with an Idempotency-Key (none when key is
// empty) and the header pairs of kv (name, value, ...).
func Post(t testing.TB, url, key, body string, kv ...string) Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Replayed fails unless replay is first replayed: the same status, body
// and Content-Type, with Idempotent-Replayed: true; first itself must not
// be marked as a replay.
func Replayed(t testing.TB, first, replay Response) {
	t.Helper()
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first response is marked as a replay")
	}
	if replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: Idempotent-Replayed %q, want true (status %d, body %s)", replay.Header.Get("Idempotent-Replayed"), replay.Status, replay.Body)
	}
	if replay.Status != first.Status || replay.Body != first.Body {
		t.Errorf("retry got %d %q, want the first response %d %q", replay.Status, replay.Body, first.Status, first.Body)
	}
	if a, b := first.Header.Get("Content-Type"), replay.Header.Get("Content-Type"); a != b {
		t.Errorf("retry Content-Type %q, want %q", b, a)
	}
}

// Problem fails unless res is an RFC 9457 problem with status and type
// (idemrt.Problem* constant).
func Problem(t testing.TB, res Response, status int, typ string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status %d, want %d (body %s)", res.Status, status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(res.Body), &p); err != nil || p.Type != typ {
		t.Errorf("problem type %q (%v), want %s", p.Type, err, typ)
	}
}

// Policy is an anonymous header-key policy of POST route; mod changes it.
func Policy(id, route string, mod ...func(*idemrt.Policy)) *idemrt.Policy {
	p := &idemrt.Policy{
		OperationID: id,
		Method:      http.MethodPost,
		Route:       route,
		Key:         idemrt.KeyFromHeader,
		KeyName:     "Idempotency-Key",
		Principal:   idemrt.PrincipalAnonymous,
	}
	for _, m := range mod {
		m(p)
	}
	return p
}
