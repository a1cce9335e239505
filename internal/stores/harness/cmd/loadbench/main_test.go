package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// serveEnv makes the test binary a "loadbench serve" of its dialect.
const serveEnv = "LOADBENCH_TEST_SERVE"

func TestMain(m *testing.M) {
	if dialect := os.Getenv(serveEnv); dialect != "" {
		if err := serve(dialect, "127.0.0.1:0", os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testConfig is a short SQLite run of this test binary as the server, or
// a skip without wrk unless IDEMGEN_TEST_WRK is set (CI installs wrk).
func testConfig(t *testing.T) (config, *bytes.Buffer) {
	t.Helper()
	cfg := config{
		dialects: []string{"sqlite"}, rounds: 1, duration: time.Second,
		connections: 4, threads: 1, wrk: "wrk",
		server: func(dialect string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), serveEnv+"="+dialect)
			return cmd
		},
		log: testWriter{t},
	}
	if err := ensureWrk(&cfg, false); err != nil {
		if os.Getenv("IDEMGEN_TEST_WRK") != "" {
			t.Fatalf("IDEMGEN_TEST_WRK is set: %v", err)
		}
		t.Skipf("%v (set IDEMGEN_TEST_WRK to fail instead)", err)
	}
	var out bytes.Buffer
	cfg.out = &out
	return cfg, &out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRun drives each kind of request (fresh keys, replays, a key naming a
// row, a row in the path) through wrk and case.lua against a SQLite
// server: every run must pass the server's checks (statuses, replays,
// handler runs), and the report must carry the ratios.
func TestRun(t *testing.T) {
	cfg, out := testConfig(t)
	cfg.cases = []string{"insert", "newkey", "newkey-tx", "get", "replay", "post-get", "noop", "mem-replay"}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cfg.cases {
		if rps := res.rps["sqlite"][name]; len(rps) != 1 || rps[0] <= 0 {
			t.Errorf("%s: requests/s %v", name, rps)
		}
	}
	for _, want := range []string{"| newkey-tx/insert |", "| replay/get |", "| sqlite | replay/get |", "| 0.90 | post-get |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestCPUProfile: with -cpuprofile, each counted run leaves the server's
// CPU profile (gzipped protobuf, as pprof writes it) under its name, and
// the warm-up none.
func TestCPUProfile(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.cases = []string{"noop", "mem-replay"}
	cfg.warmup = time.Second
	cfg.cpuprofile = filepath.Join(t.TempDir(), "prof")
	if _, err := run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(cfg.cpuprofile)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
		b, err := os.ReadFile(filepath.Join(cfg.cpuprofile, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is not a gzipped profile: %q", f.Name(), b[:min(len(b), 16)])
		}
	}
	if want := "sqlite-mem-replay-r1.pprof sqlite-noop-r1.pprof"; strings.Join(names, " ") != want {
		t.Errorf("profiles %v, want %s", names, want)
	}
}

// TestRunRefusesWrongPath: a run that would measure something other than
// its case fails, whether wrk sees it (an error status) or only the
// server's counts do (new keys where replays were meant, replays where new
// keys were meant, another success status).
func TestRunRefusesWrongPath(t *testing.T) {
	cfg, _ := testConfig(t)
	s, err := start(cfg, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	script := filepath.Join(t.TempDir(), "case.lua")
	if err := os.WriteFile(script, caseLua, 0o644); err != nil {
		t.Fatal(err)
	}
	byName := map[string]harness.HTTPCase{}
	for _, c := range s.info.Cases {
		byName[c.Name] = c
	}
	replayAsNew := byName["replay"]
	replayAsNew.Key = harness.FreshKey
	newAsReplay := byName["newkey"]
	newAsReplay.Key = harness.ReplayKey
	missingRow := byName["get"]
	missingRow.Path = "/rows/nothing-"
	okAs200 := byName["noop"]
	okAs200.Status = 200
	for _, tc := range []struct {
		c    harness.HTTPCase
		want string
	}{
		{replayAsNew, "replays (want all)"},
		{newAsReplay, "replays (want none)"},
		{missingRow, "wrk"},
		{okAs200, "status 201 (want 200)"},
	} {
		_, err := runCase(cfg, script, s, tc.c, time.Second, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s with %v: err %v, want one saying %q", tc.c.Method, tc.c.Path, tc.c.Key, err, tc.want)
		}
	}
}
