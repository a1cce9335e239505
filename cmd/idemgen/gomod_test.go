package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// heavyModules are the frameworks, observability SDKs and clients that live
// in modules of their own (adapters/echoidem, adapters/ginidem,
// adapters/otelidem, stores/redisstore, the broker adapters, the examples,
// golden/routers, cmd/idemgen-keys): a service that imports only the runtime
// and runs the generator must not get them from the root module.
var heavyModules = []string{
	"github.com/labstack/echo",
	"github.com/gin-gonic/gin",
	"github.com/ogen-go/ogen",
	"github.com/oapi-codegen/runtime",
	"github.com/go-chi/chi",
	"github.com/gorilla/mux",
	"go.opentelemetry.io/",
	"github.com/redis/go-redis",
	"github.com/nats-io/",
	"github.com/rabbitmq/amqp091-go",
	"github.com/ThreeDotsLabs/watermill",
}

// graphOnly are heavy modules that a dependency's go.mod requires, so that
// they are in the root module's graph as a go.mod file only: no package of
// theirs is built. Each is allowed only as a requirement of the module named.
var graphOnly = map[string]string{
	// kin-openapi's routers/gorillamux, which idemgen does not import.
	"github.com/gorilla/mux": "github.com/getkin/kin-openapi",
}

func heavy(path string) bool {
	for _, p := range heavyModules {
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// goRoot runs the go command in the repository's root module, outside any
// workspace (go.work joins the nested modules, whose requirements would
// otherwise count).
func goRoot(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// TestLeanModuleGraph keeps the root module's graph free of web frameworks,
// OpenTelemetry, go-redis and broker clients: no package of theirs is
// built by any package or test of the root module, and none of their
// modules is in its graph (go list -m all), except as a go.mod that a
// dependency requires (graphOnly).
func TestLeanModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	built := strings.Fields(goRoot(t, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./..."))
	slices.Sort(built)
	for _, mod := range slices.Compact(built) {
		if heavy(mod) {
			t.Errorf("a package or test of the root module builds packages of %s: move it to a module of its own (see .ci/modules)", mod)
		}
	}
	requiredBy := map[string][]string{}
	for _, line := range strings.Split(goRoot(t, "mod", "graph"), "\n") {
		from, to, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		to, _, _ = strings.Cut(to, "@")
		from, _, _ = strings.Cut(from, "@")
		requiredBy[to] = append(requiredBy[to], from)
	}
	for _, mod := range strings.Fields(goRoot(t, "list", "-m", "-f", "{{.Path}}", "all")) {
		if !heavy(mod) {
			continue
		}
		by := requiredBy[mod]
		slices.Sort(by)
		by = slices.Compact(by)
		if allowed, ok := graphOnly[mod]; ok && len(by) > 0 && slices.IndexFunc(by, func(m string) bool { return m != allowed }) < 0 {
			continue
		}
		t.Errorf("the root module's graph holds %s (required by %s): go.mod must not require it; move what needs it to a module of its own", mod, strings.Join(by, ", "))
	}
}
