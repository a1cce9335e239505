package storekit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: storekit imports the runtime and the standard library
// only, so that a generated store adds nothing else to a user's module
// (the runtime brings the two internal packages it is made of, standard
// library only as well).
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/idemgen/idemgen/storekit").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "github.com/idemgen/idemgen/storekit", strings.HasPrefix(p, "github.com/idemgen/idemgen/runtime"),
			p == "github.com/idemgen/idemgen/internal/jsonnames", p == "github.com/idemgen/idemgen/internal/policysyntax":
		default:
			t.Errorf("storekit depends on %s", p)
		}
	}
}
