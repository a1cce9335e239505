package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/idemgen/idemgen/internal/testutil"
)

// TestNoReplaceDirectives guards `go install` and `go get -tool` of
// cmd/idemgen: both refuse a module whose go.mod has replace directives
// (sqlc's gomod_test.go exists since a release broke `go install
// ...@latest` that way).
func TestNoReplaceDirectives(t *testing.T) {
	path := filepath.Join(testutil.RepoRoot(), "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Replace {
		t.Errorf("go.mod replaces %s with %s: go install of cmd/idemgen would fail", r.Old.Path, r.New.Path)
	}
	if f.Module == nil || f.Module.Mod.Path != "github.com/idemgen/idemgen" {
		t.Errorf("module path %v, want github.com/idemgen/idemgen", f.Module)
	}
}
