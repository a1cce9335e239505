package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestNoLargeTrackedFiles keeps built binaries and data dumps out of the
// repository: a 22 MB build of the payments example was once committed.
// Specs used as test inputs live outside the repository (../shared/specs).
func TestNoLargeTrackedFiles(t *testing.T) {
	const limit = 1 << 20
	root := testutil.RepoRoot()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	for name := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if fi.Mode().IsRegular() && fi.Size() > limit {
			t.Errorf("%s is tracked and has %d bytes (limit %d): built outputs belong in .gitignore", name, fi.Size(), limit)
		}
	}
}
