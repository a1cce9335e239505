package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"

	"github.com/idemgen/idemgen/templates"
)

// TestRendered checks that internal/stores/<dialect> holds what idemgen
// renders for each dialect; go test ./internal/stores/harness -update
// rewrites them. It lives here, not in the rendered packages, so that it
// still runs when a template change breaks their build.
func TestRendered(t *testing.T) {
	for _, d := range templates.Dialects {
		t.Run(d, func(t *testing.T) { CheckRendered(t, d) })
	}
}

// TestNoAppClock: the stores never read the application's clock nor send
// it a time; leases and TTLs travel as durations and every time decision
// is made by the database (now(), julianday('now'), UTC_TIMESTAMP()), so
// application servers with skewed clocks agree on who owns a key.
func TestNoAppClock(t *testing.T) {
	for _, d := range templates.Dialects {
		files, err := templates.Render(templates.Data{Package: d, Dialect: d, Table: Table})
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if strings.HasSuffix(name, ".go") {
				checkNoAppClock(t, d+"/"+name, b)
			}
		}
	}
	// The library the rendered stores import, and its packages (pgkit).
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "storekit", "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("storekit's sources: %v, %v", paths, err)
	}
	sub, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "storekit", "*", "*.go"))
	if err != nil || len(sub) == 0 {
		t.Fatalf("storekit's packages' sources: %v, %v", sub, err)
	}
	paths = append(paths, sub...)
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(testutil.RepoRoot(), p)
		checkNoAppClock(t, filepath.ToSlash(rel), b)
	}
}

func checkNoAppClock(t *testing.T, name string, b []byte) {
	t.Helper()
	for _, bad := range []string{"time.Now(", "time.Since(", "time.Until(", "time.Time"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("%s uses %s", name, bad)
		}
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := NewKey()
		if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(k) {
			t.Fatalf("NewKey() = %q, not a version 4 UUID", k)
		}
		if seen[k] {
			t.Fatalf("NewKey() repeated %q", k)
		}
		seen[k] = true
	}
}
