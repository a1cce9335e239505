// Command loadbench measures what users pay for idemgen from outside the
// server's process: for each dialect it starts a server (this command,
// "loadbench serve", a process of its own) serving the HTTP benchmarks'
// cases on a fresh database (harness.NewHTTPService: the same handlers as
// the in-process BenchmarkHTTP, plus the floors of BenchmarkHTTPFloor),
// drives each case with wrk (16 connections, in turn within each round),
// checks that every answer had the case's status and that new keys ran the
// handler once each and replays never, and prints requests/s per round and
// each ratio's median and range over the rounds as markdown, with the
// issue 25 targets and their floors.
//
// From the repository root, with the tests' variables set
// (IDEMGEN_TEST_POSTGRES, IDEMGEN_TEST_MYSQL):
//
//	go run ./internal/stores/harness/cmd/loadbench -dialects postgres,sqlite,mysql -rounds 3 -duration 4s
//
// wrk is installed with apt-get when missing (-install=false to fail
// instead). With -cpuprofile DIR, each counted run also writes the
// server's CPU profile over wrk's run to DIR/DIALECT-CASE-rROUND.pprof
// (go tool pprof reads it; the server binary is the one go run built).
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

//go:embed case.lua
var caseLua []byte

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		fs := flag.NewFlagSet("loadbench serve", flag.ExitOnError)
		dialect := fs.String("dialect", "sqlite", "postgres, sqlite or mysql")
		addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
		fs.Parse(os.Args[2:])
		if err := serve(*dialect, *addr, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench serve:", err)
			os.Exit(1)
		}
		return
	}
	fs := flag.NewFlagSet("loadbench", flag.ExitOnError)
	var cfg config
	dialects := fs.String("dialects", "postgres,sqlite,mysql", "comma-separated dialects")
	cases := fs.String("cases", "", "comma-separated cases (default: all); ratios need both sides")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every case once")
	fs.DurationVar(&cfg.duration, "duration", 4*time.Second, "wrk's duration per case and round (whole seconds)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "wrk's duration per case before the rounds, not counted (whole seconds; 0: none)")
	fs.IntVar(&cfg.connections, "connections", harness.Clients, "wrk's connections")
	fs.IntVar(&cfg.threads, "threads", 2, "wrk's threads")
	fs.StringVar(&cfg.wrk, "wrk", "wrk", "the wrk binary")
	install := fs.Bool("install", true, "install wrk with apt-get when it is missing")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write the server's CPU profile of each counted run to this directory (DIALECT-CASE-rROUND.pprof)")
	fs.Parse(os.Args[1:])
	cfg.dialects = splitList(*dialects)
	cfg.cases = splitList(*cases)
	cfg.out = os.Stdout
	cfg.log = os.Stderr
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	cfg.server = func(dialect string) *exec.Cmd { return exec.Command(self, "serve", "-dialect", dialect) }
	if err := ensureWrk(&cfg, *install); err != nil {
		fatal(err)
	}
	if _, err := run(context.Background(), cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "loadbench: FAIL:", err)
	os.Exit(1)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// config is one measurement.
type config struct {
	dialects, cases []string
	rounds          int
	duration        time.Duration
	// warmup runs each case once before the rounds (connections, caches),
	// checked but not counted.
	warmup      time.Duration
	connections int
	threads     int
	wrk         string
	// cpuprofile, when set, is the directory where the server's CPU
	// profile of each counted run goes.
	cpuprofile string
	// server returns the command that serves one dialect.
	server   func(dialect string) *exec.Cmd
	out, log io.Writer
}

// ensureWrk finds wrk, or installs it with apt-get when install is set.
func ensureWrk(cfg *config, install bool) error {
	if p, err := exec.LookPath(cfg.wrk); err == nil {
		cfg.wrk = p
		return nil
	}
	if !install || cfg.wrk != "wrk" {
		return fmt.Errorf("%s not found (install it: apt-get install -y wrk)", cfg.wrk)
	}
	fmt.Fprintln(cfg.log, "loadbench: wrk is missing; apt-get install -y wrk")
	for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "wrk"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = cfg.log, cfg.log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	p, err := exec.LookPath("wrk")
	if err != nil {
		return fmt.Errorf("wrk not found after apt-get install: %w", err)
	}
	cfg.wrk = p
	return nil
}

// server is one running "loadbench serve".
type server struct {
	dialect string
	url     string
	info    Info
	cmd     *exec.Cmd
	stdin   io.WriteCloser
}

// start starts the server of dialect and waits until it serves.
func start(cfg config, dialect string) (*server, error) {
	cmd := cfg.server(dialect)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cfg.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{dialect: dialect, cmd: cmd, stdin: stdin}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), readyLine); ok {
			s.url = u
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if s.url == "" {
		s.stop()
		return nil, fmt.Errorf("the %s server exited before serving", dialect)
	}
	if err := getJSON(s.url+infoPath, &s.info); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop ends the server (closing its stdin: it drops its database) and
// waits for it.
func (s *server) stop() error {
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		return fmt.Errorf("the %s server did not stop within 30 s; killed", s.dialect)
	}
}

// closingClient is loadbench's own client of the server: a connection per
// request, closed after it, so that the server's open connections other
// than the stats request's are wrk's (see stats).
var closingClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func getJSON(url string, v any) error {
	resp, err := closingClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// stats returns the server's counts once no request is in flight and no
// connection but this request's is open: wrk's connections are closed, so
// every request wrk left when it stopped (answered, being read, or still
// in the server's socket buffer) has been served and counted (one that had
// not been was counted in the next case's run, and failed it).
func (s *server) stats() (harness.ServiceStats, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st harness.ServiceStats
		if err := getJSON(s.url+harness.StatsPath, &st); err != nil {
			return st, err
		}
		// Open counts this request's own connection.
		if st.InFlight == 0 && st.Open <= 1 {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the %s server still serves %d requests (%d connections open) 30 s after wrk ended", s.dialect, st.InFlight, st.Open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// result is what run measured: requests/s of each dialect's case, per round.
type result struct {
	rps map[string]map[string][]float64
	// order of the dialects' servers, and their infos.
	servers []*server
	load    [2]string
}

var wrkResult = regexp.MustCompile(`WRKRESULT requests=(\d+) duration_us=(\d+) status=(\d+) connect=(\d+) read=(\d+) write=(\d+) timeout=(\d+)`)

// runCase runs wrk on one case of s and checks the run. With a profile
// name and cfg.cpuprofile set, the server's CPU profile over wrk's run goes
// to cfg.cpuprofile/profile.pprof.
func runCase(cfg config, script string, s *server, c harness.HTTPCase, duration time.Duration, profile string) (float64, error) {
	kind := map[harness.KeyKind]string{
		harness.FreshKey: "fresh", harness.ReplayKey: "replay", harness.RowKey: "rowkey", harness.RowPath: "rowpath",
	}[c.Key]
	if kind == "" {
		return 0, fmt.Errorf("case %s: unknown key kind %d", c.Name, c.Key)
	}
	before, err := s.stats()
	if err != nil {
		return 0, err
	}
	runPrefix := fmt.Sprintf("lb%016x", rand.Uint64())
	cmd := exec.Command(cfg.wrk, "-t", strconv.Itoa(cfg.threads), "-c", strconv.Itoa(cfg.connections),
		"-d", fmt.Sprintf("%ds", int(duration.Seconds())), "--timeout", "10s", "-s", script, s.url,
		"--", c.Method, c.Path, kind, s.info.Prefix, strconv.Itoa(s.info.Rows), runPrefix, s.info.Body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var profiled chan error
	if cfg.cpuprofile != "" && profile != "" {
		profiled = make(chan error, 1)
		go func() {
			profiled <- fetchProfile(s.url, duration, filepath.Join(cfg.cpuprofile, profile+".pprof"))
		}()
	}
	werr := cmd.Run()
	if profiled != nil {
		if err := <-profiled; err != nil {
			return 0, fmt.Errorf("%s %s: CPU profile: %w", s.dialect, c.Name, err)
		}
	}
	m := wrkResult.FindStringSubmatch(stdout.String())
	if werr != nil || m == nil {
		return 0, fmt.Errorf("%s %s: wrk: %v\n%s%s", s.dialect, c.Name, werr, stdout.String(), stderr.String())
	}
	n := make([]int64, len(m)-1)
	for i := range n {
		n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	requests, durationUs := n[0], n[1]
	after, err := s.stats()
	if err != nil {
		return 0, err
	}
	d := after.Routes[c.Route()].Sub(before.Routes[c.Route()])
	if err := c.Check(d, requests, cfg.connections); err != nil {
		return 0, fmt.Errorf("%s: %w", s.dialect, err)
	}
	for route, st := range after.Routes {
		if b := before.Routes[route]; route != c.Route() && (st.Requests != b.Requests || st.Abandoned != b.Abandoned) {
			return 0, fmt.Errorf("%s %s: route %s served requests during the run: something else is sending", s.dialect, c.Name, route)
		}
	}
	if durationUs <= 0 {
		return 0, fmt.Errorf("%s %s: wrk reported no duration", s.dialect, c.Name)
	}
	return float64(requests) / (float64(durationUs) / 1e6), nil
}

// run starts the servers, runs the rounds and prints the report.
func run(ctx context.Context, cfg config) (*result, error) {
	if len(cfg.dialects) == 0 || cfg.rounds < 1 {
		return nil, errors.New("want at least one dialect and one round")
	}
	if cfg.duration < time.Second || cfg.duration%time.Second != 0 || cfg.warmup < 0 || cfg.warmup%time.Second != 0 {
		return nil, fmt.Errorf("duration %s, warm-up %s: wrk takes whole seconds", cfg.duration, cfg.warmup)
	}
	if cfg.cpuprofile != "" {
		if err := os.MkdirAll(cfg.cpuprofile, 0o755); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "loadbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "case.lua")
	if err := os.WriteFile(script, caseLua, 0o644); err != nil {
		return nil, err
	}
	res := &result{rps: map[string]map[string][]float64{}}
	defer func() {
		for _, s := range res.servers {
			if err := s.stop(); err != nil {
				fmt.Fprintf(cfg.log, "loadbench: stopping the %s server: %v\n", s.dialect, err)
			}
		}
	}()
	for _, d := range cfg.dialects {
		s, err := start(cfg, d)
		if err != nil {
			return nil, err
		}
		res.servers = append(res.servers, s)
		res.rps[d] = map[string][]float64{}
		for _, name := range cfg.cases {
			if !slices.ContainsFunc(s.info.Cases, func(c harness.HTTPCase) bool { return c.Name == name }) {
				return nil, fmt.Errorf("%s has no case %q", d, name)
			}
		}
	}
	selected := func(c harness.HTTPCase) bool { return len(cfg.cases) == 0 || slices.Contains(cfg.cases, c.Name) }
	if cfg.warmup > 0 {
		fmt.Fprintf(cfg.log, "loadbench: warming up, %s per case\n", cfg.warmup)
		for _, s := range res.servers {
			for _, c := range s.info.Cases {
				if selected(c) {
					if _, err := runCase(cfg, script, s, c, cfg.warmup, ""); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	res.load[0] = loadAverage()
	fmt.Fprintf(cfg.log, "loadbench: load average %s; %d rounds of %s per case, wrk -t%d -c%d\n",
		res.load[0], cfg.rounds, cfg.duration, cfg.threads, cfg.connections)
	for r := range cfg.rounds {
		for _, s := range res.servers {
			for _, c := range s.info.Cases {
				if !selected(c) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				rps, err := runCase(cfg, script, s, c, cfg.duration, fmt.Sprintf("%s-%s-r%d", s.dialect, c.Name, r+1))
				if err != nil {
					return nil, err
				}
				res.rps[s.dialect][c.Name] = append(res.rps[s.dialect][c.Name], rps)
				fmt.Fprintf(cfg.log, "loadbench: round %d %s %s %.0f req/s\n", r+1, s.dialect, c.Name, rps)
			}
		}
	}
	res.load[1] = loadAverage()
	report(cfg, res)
	return res, nil
}

// fetchProfile writes the CPU profile of the server at url over the next
// d to path.
func fetchProfile(url string, d time.Duration, path string) error {
	resp, err := closingClient.Get(fmt.Sprintf("%s%s?seconds=%d", url, profilePath, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", profilePath, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadAverage is /proc/loadavg's three averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
