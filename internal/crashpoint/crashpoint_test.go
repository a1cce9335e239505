package crashpoint

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	_ "github.com/idemgen/idemgen/internal/testutil" // -update
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec, want, err string
	}{
		{"", "", ""},
		{"after-commit", "after-commit:1", ""},
		{"after-commit:3", "after-commit:3", ""},
		{"after-commit:0", "", "positive integer"},
		{"after-commit:x", "", "positive integer"},
		{"before-commit", "", "unknown point"},
	} {
		p, err := Parse(tc.spec, "after-commit", "after-publish")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.spec, p.String(), err, tc.want)
		}
	}
}

// TestReachedKills runs this test binary as a child that reaches the point
// three times with "after-commit:2": it must die by SIGKILL at the second
// passage, after printing the first and before printing the second.
func TestReachedKills(t *testing.T) {
	if spec := os.Getenv("CRASHPOINT_CHILD"); spec != "" {
		p, err := Parse(spec, "after-commit")
		if err != nil {
			os.Exit(3)
		}
		for i := 1; i <= 3; i++ {
			p.Reached("other")
			p.Reached("after-commit", "message", strconv.Itoa(i))
			os.Stdout.WriteString("passed " + string(rune('0'+i)) + "\n")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReachedKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=after-commit:2")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child: %v, want death by SIGKILL\nstdout:\n%s", err, stdout.String())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exited with %v, want SIGKILL", ee)
	}
	if got := stdout.String(); got != "passed 1\n" {
		t.Errorf("child's output %q, want only the first passage", got)
	}
	if !strings.Contains(stderr.String(), "crashpoint: SIGKILL at after-commit (passage 2): message 2\n") {
		t.Errorf("child's stderr lacks the crash line:\n%s", stderr.String())
	}
}
