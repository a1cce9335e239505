// Package harness holds what the key-store tests in internal/stores share:
// the freshness check of the rendered stores, a TCP proxy that can be cut,
// and helpers for HTTP requests through the runtime's wrapper.
package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
	"github.com/idemgen/idemgen/templates"
)

// Table is the key table the rendered test stores use.
const Table = "idempotency_keys"

// CheckRendered renders dialect's store into its folder
// (internal/stores/<dialect>, package <dialect>) and fails when a committed
// file differs or is missing; with -update it rewrites them instead.
func CheckRendered(t *testing.T, dialect string) {
	t.Helper()
	files, err := templates.Render(templates.Data{Package: dialect, Dialect: dialect, Table: Table})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testutil.RepoRoot(), "internal", "stores", dialect)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		if *testutil.Update {
			if err := os.WriteFile(p, files[name], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v (run go test ./internal/stores/... -update)", name, err)
			continue
		}
		if !bytes.Equal(got, files[name]) {
			t.Errorf("%s is stale: run go test ./internal/stores/... -update", name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "idemgen_") && files[e.Name()] == nil {
			if *testutil.Update {
				os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			t.Errorf("%s is not rendered any more: delete it (or run -update)", e.Name())
		}
	}
}
