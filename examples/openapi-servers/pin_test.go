package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/idemgen/idemgen/internal/testutil"
)

// The ogen runtime that internal/ogenapi imports (this module's go.mod) must
// be the version whose generator go generate runs (the repository's
// tools.mod): a bump of one without the other leaves the committed server
// generated for another runtime, and the freshness check in CI sees no
// change.
func TestOgenPinnedOnce(t *testing.T) {
	version := func(path string) string {
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
		t.Fatalf("%s does not require github.com/ogen-go/ogen", path)
		return ""
	}
	if mod, tools := version("go.mod"), version(filepath.Join(testutil.RepoRoot(), "tools.mod")); mod != tools {
		t.Errorf("examples/openapi-servers/go.mod requires ogen %s, tools.mod pins %s: make them the same and run go generate ./...", mod, tools)
	}
}
