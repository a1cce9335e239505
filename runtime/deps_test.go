package runtime_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The runtime imports only the standard library (docs/architecture.md),
// and the two internal packages it shares with the generator and the
// adapters, which import only the standard library too (go list -deps
// lists their dependencies as well).
func TestRuntimeDependsOnlyOnStdlib(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"./runtime", "./runtime/storetest"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !runtimeOwn[dep] {
				t.Errorf("%s depends on %s, outside the standard library", pkg, dep)
			}
		}
	}
}

// runtimeOwn are the packages the runtime is made of.
var runtimeOwn = map[string]bool{
	"github.com/idemgen/idemgen/runtime":               true,
	"github.com/idemgen/idemgen/runtime/storetest":     true,
	"github.com/idemgen/idemgen/internal/jsonnames":    true,
	"github.com/idemgen/idemgen/internal/policysyntax": true,
}
