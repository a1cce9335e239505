package testutil_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// `go test ./... -update` passes -update to every test binary it builds,
// and a binary that does not define the flag fails ("flag provided but
// not defined"). Every test binary of every module must therefore link
// this package, directly or through a helper (msgtest, harness).
func TestEveryTestBinaryDefinesUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the packages of every module with go list")
	}
	root := testutil.RepoRoot()
	out, err := exec.Command("bash", filepath.Join(root, ".ci", "modules")).Output()
	if err != nil {
		t.Fatalf(".ci/modules: %v", err)
	}
	const testutilPath = "github.com/idemgen/idemgen/internal/testutil"
	binaries := 0
	for _, mod := range strings.Fields(string(out)) {
		cmd := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
		cmd.Dir = filepath.Join(root, mod)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		list, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -test in module %s: %v\n%s", mod, err, stderr.Bytes())
		}
		sc := bufio.NewScanner(bytes.NewReader(list))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || !strings.HasSuffix(fields[0], ".test") {
				continue // a package, or a package compiled for a test
			}
			binaries++
			if !slices.Contains(fields[1:], testutilPath) {
				t.Errorf("module %s: the test binary %s does not define -update: import %s in one of its test files (_ %q)",
					mod, fields[0], testutilPath, testutilPath)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if binaries == 0 {
		t.Fatal("go list found no test binary in any module")
	}
}
