package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The ogen runtime that internal/ogenapi imports (go.mod) must be the
// version whose generator go generate runs (tools.mod): a bump of one
// without the other leaves the committed server generated for another
// runtime, and the freshness check in CI sees no change.
func TestOgenPinnedOnce(t *testing.T) {
	version := func(name string) string {
		path := filepath.Join(testutil.RepoRoot(), name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(path, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Require {
			if r.Mod.Path == "github.com/ogen-go/ogen" {
				return r.Mod.Version
			}
		}
		t.Fatalf("%s does not require github.com/ogen-go/ogen", name)
		return ""
	}
	if mod, tools := version("go.mod"), version("tools.mod"); mod != tools {
		t.Errorf("go.mod requires ogen %s, tools.mod pins %s: make them the same and run go generate ./...", mod, tools)
	}
}
