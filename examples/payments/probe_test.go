package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	idemgenOnce sync.Once
	idemgenPath string
	idemgenErr  error
)

// idemgenBinary builds cmd/idemgen once per test run.
func idemgenBinary(t *testing.T) string {
	t.Helper()
	idemgenOnce.Do(func() {
		idemgenPath = filepath.Join(binDirOrTemp(t), "idemgen")
		out, err := exec.Command("go", "build", "-o", idemgenPath, "../../cmd/idemgen").CombinedOutput()
		if err != nil {
			idemgenErr = err
			idemgenPath = string(out)
		}
	})
	if idemgenErr != nil {
		t.Fatalf("go build cmd/idemgen: %v\n%s", idemgenErr, idemgenPath)
	}
	return idemgenPath
}

func binDirOrTemp(t *testing.T) string {
	binary(t) // makes binDir, removed by TestMain
	return binDir
}

// probe runs idemgen probe against base and returns its exit code and
// output.
func probe(t *testing.T, base string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(idemgenBinary(t), append([]string{"probe", "-spec", "openapi.yaml", "-base", base}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// creds are what the stack in front of the middleware wants: a bearer
// token, and the webhook's signature of the probe's body {}.
func creds() []string {
	return []string{"-H", "Authorization: Bearer acct_probe",
		"-H", signatureHeader + ": " + signHeader([]byte(testWebhookSecret), time.Now(), []byte("{}"))}
}

// TestProbe: idemgen probe proves the running example protected (exit 0),
// and refuses to prove a plain HTTP server or the example under a wrong
// base path (exit 1, saying why for each operation).
func TestProbe(t *testing.T) {
	p := start(t, "-db", filepath.Join(t.TempDir(), "probe.db"))
	ops := []string{"createCharge", "createRefund", "receivePaymentEvent"}

	code, out := probe(t, p.base, creds()...)
	if code != 0 || strings.Count(out, "PROTECTED") != 3 {
		t.Fatalf("against the example: exit %d\n%s", code, out)
	}

	code, out = probe(t, p.base)
	if code != 1 || !strings.Contains(out, "with -H") {
		t.Fatalf("without credentials: exit %d\n%s", code, out)
	}

	code, out = probe(t, p.base+"/api", creds()...)
	if code != 1 || strings.Count(out, "NOT PROVEN: answered 404") != 3 {
		t.Fatalf("under a wrong base path: exit %d\n%s", code, out)
	}

	// A gateway that strips Idempotency-Key: the middleware refuses the
	// probe (key-missing), but no real request's key would reach it.
	target, _ := url.Parse(p.base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Idempotency-Key")
		proxy.ServeHTTP(w, r)
	}))
	defer gateway.Close()
	code, out = probe(t, gateway.URL, creds()...)
	if code != 1 || !strings.Contains(out, "createCharge") || !strings.Contains(out, "header stripped") || strings.Count(out, "PROTECTED") != 2 {
		t.Fatalf("behind a gateway that strips the key header: exit %d\n%s", code, out)
	}

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	}))
	defer plain.Close()
	code, out = probe(t, plain.URL, creds()...)
	if code != 1 || strings.Count(out, "without the idempotency middleware") != 3 {
		t.Fatalf("against a plain server: exit %d\n%s", code, out)
	}
	for _, op := range ops {
		if !strings.Contains(out, op) {
			t.Errorf("the report does not name %s:\n%s", op, out)
		}
	}

	code, out = probe(t, "http://127.0.0.1:1", creds()...)
	if code != 2 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "cannot reach") {
		t.Fatalf("an address nothing listens on: exit %d, want 2 and one line\n%s", code, out)
	}
	code, out = probe(t, "localhost:8080")
	if code != 2 || !strings.Contains(out, "not an http:// or https:// URL") {
		t.Fatalf("a URL without a scheme: exit %d\n%s", code, out)
	}

	// -full sends real requests: replay, 422 on a changed body, duplicates.
	code, out = probe(t, p.base, append(creds(), "-full")...)
	if code != 0 || strings.Count(out, "-full: replay, 422, duplicates") != 1 || strings.Count(out, "its key comes from the body") != 2 {
		t.Fatalf("-full against the example: exit %d\n%s", code, out)
	}

	// With -body, an operation keyed by its body's fields gets real requests
	// too: 4 concurrent copies of a refund (one runs), the same refund again
	// (a replay), and the refund with a member added (422).
	charge := createProbeCharge(t, p.base)
	refund := filepath.Join(t.TempDir(), "refund.json")
	if err := os.WriteFile(refund, []byte(`{"charge":"`+charge+`","amount":300}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = probe(t, p.base, append(creds(), "-full", "-body", "createRefund="+refund)...)
	if code != 0 || strings.Count(out, "-full: replay, 422, duplicates") != 2 || strings.Count(out, "its key comes from the body") != 1 {
		t.Fatalf("-full -body against the example: exit %d\n%s", code, out)
	}
	if n := countRefunds(t, p.base, charge); n != 1 {
		t.Fatalf("-full -body made %d refunds of the probe's charge, want 1", n)
	}
	// A body for an operation the spec does not annotate, or without -full,
	// is a usage error.
	if code, out = probe(t, p.base, append(creds(), "-full", "-body", "listCharges="+refund)...); code != 2 {
		t.Fatalf("-body for an unannotated operation: exit %d\n%s", code, out)
	}
	if code, out = probe(t, p.base, append(creds(), "-body", "createRefund="+refund)...); code != 2 {
		t.Fatalf("-body without -full: exit %d\n%s", code, out)
	}
}

// createProbeCharge creates a charge of the probe's merchant and returns
// its id.
func createProbeCharge(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/charges", strings.NewReader(`{"amount":1000,"currency":"usd","customer":"cus_probe"}`))
	req.Header.Set("Authorization", "Bearer acct_probe")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "probe-charge-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil || res.StatusCode != 201 || c.ID == "" {
		t.Fatalf("create charge: %d, %+v, %v", res.StatusCode, c, err)
	}
	return c.ID
}

// countRefunds is how much of charge was refunded, in refunds of 300.
func countRefunds(t *testing.T, base, charge string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/charges/"+charge, nil)
	req.Header.Set("Authorization", "Bearer acct_probe")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c struct {
		AmountRefunded int `json:"amount_refunded"`
	}
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil || res.StatusCode != 200 {
		t.Fatalf("get charge: %d, %v", res.StatusCode, err)
	}
	return c.AmountRefunded / 300
}
