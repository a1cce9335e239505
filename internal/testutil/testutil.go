// Package testutil holds what the project's tests share: the -update flag
// (so that `go test ./... -update` works in every package), the repository
// root, the shared spec corpus, and the database DSNs.
package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Update is the -update flag: golden files are rewritten instead of compared.
var Update = flag.Bool("update", false, "rewrite golden files instead of comparing them")

// RepoRoot is the repository's root folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SpecsDir is ../shared/specs beside the repository; the test is skipped
// when it is absent (a laptop without the shared corpus).
func SpecsDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "..", "shared", "specs")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("IDEMGEN_REQUIRE_SPECS") != "" {
			t.Fatalf("spec corpus %s: %v", dir, err)
		}
		t.Skipf("spec corpus not found at %s", dir)
	}
	return dir
}

// PostgresDSN returns IDEMGEN_TEST_POSTGRES or skips the test.
func PostgresDSN(t testing.TB) string { return dsn(t, "IDEMGEN_TEST_POSTGRES") }

// MySQLDSN returns IDEMGEN_TEST_MYSQL or skips the test.
func MySQLDSN(t testing.TB) string { return dsn(t, "IDEMGEN_TEST_MYSQL") }

func dsn(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s not set", env)
	}
	return v
}
