package idemclient_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The client imports only the standard library and the runtime (which is
// standard library only too, with the two internal packages it is made
// of), so that a client program gets no other
// dependency from it.
func TestClientDependsOnlyOnStdlibAndRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./client/idemclient")
	cmd.Dir = testutil.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/idemgen/idemgen/client/idemclient", "github.com/idemgen/idemgen/runtime",
			"github.com/idemgen/idemgen/internal/jsonnames", "github.com/idemgen/idemgen/internal/policysyntax":
		default:
			t.Errorf("client/idemclient depends on %s", dep)
		}
	}
}
