package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The end-to-end test runs the three processes of the pipeline as a user
// would: the payments example's binary and this module's ledger binary
// (relay and consume), each killed and restarted.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds the payments server (module examples/payments) and the ledger command
// (this module) once per test run, with the race detector when the test
// has it.
func binaries(t *testing.T) (payments, ledger string) {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "ledger-e2e-"); buildErr != nil {
			return
		}
		race := []string{}
		if raceEnabled {
			race = []string{"-race"}
		}
		for _, b := range []struct{ dir, pkg, out string }{
			{filepath.Join(testutil.RepoRoot(), "examples", "payments"), ".", "payments"}, // a module of its own
			{".", ".", "ledger"},
		} {
			cmd := exec.Command("go", append(append([]string{"build"}, race...), "-o", filepath.Join(binDir, b.out), b.pkg)...)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "payments"), filepath.Join(binDir, "ledger")
}

// role is one process of the pipeline, started, killed and restarted with
// the same command line; its log keeps every incarnation's stderr.
type role struct {
	t     *testing.T
	name  string
	bin   string
	args  []string
	ready *regexp.Regexp // a log line that says the process is serving

	mu     sync.Mutex
	logs   bytes.Buffer
	cur    *exec.Cmd
	done   chan struct{} // closed when cur has exited
	starts int
}

func newRole(t *testing.T, name, bin string, ready *regexp.Regexp, args ...string) *role {
	r := &role{t: t, name: name, bin: bin, args: args, ready: ready}
	t.Cleanup(func() {
		r.kill()
		if strings.Contains(r.log(), "WARNING: DATA RACE") {
			t.Errorf("the race detector fired in %s", name)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, r.log())
		}
	})
	return r
}

// start runs a new incarnation with env added to the test's environment
// and waits until it logs its ready line.
func (r *role) start(env ...string) {
	r.t.Helper()
	cmd := exec.Command(r.bin, r.args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	r.mu.Lock()
	r.cur, r.done = cmd, done
	r.starts++
	fmt.Fprintf(&r.logs, "----- %s start %d %v\n", r.name, r.starts, env)
	r.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.logs.WriteString(line + "\n")
			r.mu.Unlock()
			if r.ready.MatchString(line) {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait()
		r.mu.Lock()
		fmt.Fprintf(&r.logs, "----- %s exited: %v\n", r.name, cmd.ProcessState)
		r.mu.Unlock()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		select {
		case <-ready: // ready, then at once at its crash point
		default:
			r.t.Fatalf("%s exited before it was ready: %v\n%s", r.name, cmd.ProcessState, r.log())
		}
	case <-time.After(60 * time.Second):
		r.t.Fatalf("%s was not ready within 60s\n%s", r.name, r.log())
	}
}

// kill sends SIGKILL to the running incarnation and waits for its end.
func (r *role) kill() {
	r.mu.Lock()
	cmd, done := r.cur, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// waitCrash waits for the running incarnation to kill itself at its crash
// point: it must die by SIGKILL, having logged the crashpoint line.
func (r *role) waitCrash(within time.Duration) {
	r.t.Helper()
	r.mu.Lock()
	cmd, done := r.cur, r.done
	r.mu.Unlock()
	select {
	case <-done:
	case <-time.After(within):
		r.t.Fatalf("%s did not reach its crash point within %v\n%s", r.name, within, r.log())
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		r.t.Fatalf("%s exited with %v, want SIGKILL at its crash point\n%s", r.name, cmd.ProcessState, r.log())
	}
	if !strings.Contains(r.log(), "crashpoint: SIGKILL at ") {
		r.t.Fatalf("%s died by SIGKILL without its crashpoint line\n%s", r.name, r.log())
	}
}

func (r *role) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// count counts the log lines containing each of subs.
func (r *role) count(subs ...string) int {
	n := 0
lines:
	for _, line := range strings.Split(r.log(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		n++
	}
	return n
}
