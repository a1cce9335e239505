package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// HTTPRatios measures what users pay: a real net/http server on
// 127.0.0.1 serving NewHTTPService(hb, nil), whose handler inserts one row,
// bare and protected (both modes), a bare primary-key GET of one row
// against replays of completed keys, and a bare no-op POST against replays
// from the in-memory store. 16 clients (keep-alive connections) send each
// case for 250 ms in turn, 8 rounds per b.N, so that a change of load on a
// shared machine hits both sides of a ratio alike. It reports each case's
// requests per second, the ratios, and the 1-minute load average before
// and after (load1-start, load1-end). The case post-get, a bare POST
// carrying the replay's request whose handler does the GET's work and
// answers as a replay does, is the floor of replay/get: replay/post-get is
// what the wrapper and the store cost over it, post-get/get what a POST
// with a body costs over a GET. IDEMGEN_BENCH_CASES selects cases (see
// interleave). The client runs in the server's process and shares its
// cores: cmd/loadbench measures the same service from wrk, a process of
// its own.
func HTTPRatios(b *testing.B, hb HTTPBackend) {
	httpBench(b, hb, nil, nil)
}

// httpBench serves NewHTTPService(hb, floors) on a real loopback server,
// seeds it, and interleaves its cases (only those named, when only is not
// nil) with 16 clients, checking at the end that every case measured the
// path it names (HTTPCase.Check).
func httpBench(b *testing.B, hb HTTPBackend, floors []HTTPFloor, only []string) {
	load0 := loadAverage()
	svc, err := NewHTTPService(hb, floors)
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Seed(context.Background()); err != nil {
		b.Fatal(err)
	}
	srv, client := serveHTTP(b, svc)
	var cases []*benchCase
	byName := map[string]HTTPCase{}
	for _, c := range svc.Cases {
		if only != nil && !slices.Contains(only, c.Name) {
			continue
		}
		byName[c.Name] = c
		cases = append(cases, &benchCase{name: c.Name, fn: func(_ context.Context, i int64) error {
			req, err := svc.Request(srv.URL, c, i)
			if err != nil {
				return err
			}
			return do(client, req, c.Status)
		}})
	}
	var ratios [][2]string
	for _, r := range svc.Ratios {
		if _, ok := byName[r[0]]; ok {
			if _, ok := byName[r[1]]; ok {
				ratios = append(ratios, r)
			}
		}
	}
	ran := interleave(b, cases, ratios)
	stats := svc.Stats()
	for _, c := range ran {
		if byName[c].Route() == "/charges" {
			continue // newkey and replay share the route: checked per slice by their statuses only
		}
		if err := byName[c].Check(stats.Routes[byName[c].Route()], 0, Clients); err != nil {
			b.Error(err)
		}
	}
	b.ReportMetric(load0, "load1-start")
	b.ReportMetric(loadAverage(), "load1-end")
}

// do sends req and requires status want, reading the whole body so that
// the connection is reused.
func do(c *http.Client, req *http.Request, want int) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, buf.Bytes())
	}
	return nil
}

// loadAverage is the 1-minute load average (Linux), or 0.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// serveHTTP serves h on a real loopback server, and returns it with the
// client the benchmarks send through: Clients keep-alive connections. Both
// are closed when b ends.
func serveHTTP(b *testing.B, h http.Handler) (*httptest.Server, *http.Client) {
	srv := httptest.NewServer(h)
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: Clients, MaxIdleConnsPerHost: Clients, MaxConnsPerHost: Clients,
		DisableCompression: true,
	}}
	b.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
	})
	return srv, client
}
