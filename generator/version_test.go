package generator

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	mod := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go run from this repository", debug.BuildInfo{Main: *mod(modulePath, "(devel)", nil)}, "(devel)"},
		{"go install @v1.2.3", debug.BuildInfo{Main: *mod(modulePath, "v1.2.3", nil)}, "v1.2.3"},
		{"go build of a checkout, VCS-stamped", debug.BuildInfo{
			Main:     *mod(modulePath, "v0.0.0-20261201080000-ca3f1c9abcde+dirty", nil),
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "ca3f1c9abcde"}},
		}, "(devel)"},
		// go tool idemgen, or go run .../cmd/idemgen, in a user's module:
		// the main package's module is idemgen's, at the required version.
		{"go tool idemgen in a user's module", debug.BuildInfo{Main: *mod(modulePath, "v1.4.0", nil)}, "v1.4.0"},
		{"go tool idemgen, replaced by a module version", debug.BuildInfo{
			Main: *mod(modulePath, "v1.4.0", mod("example.com/fork/idemgen", "v1.4.1-fork", nil)),
		}, "v1.4.1-fork"},
		// .ci/adopt.sh's go mod edit -replace ...=../idemgen (go version -m
		// prints "=> ../idemgen (devel)").
		{"go tool idemgen, replaced by a folder", debug.BuildInfo{
			Main: *mod(modulePath, "v0.0.0", mod("../idemgen", "(devel)", nil)),
		}, "(devel)"},
		// A user's program calling generator.Generate.
		{"a dependency", debug.BuildInfo{
			Main: *mod("example.com/shop", "(devel)", nil),
			Deps: []*debug.Module{mod("github.com/jackc/pgx/v5", "v5.7.0", nil), mod(modulePath, "v1.4.0", nil)},
		}, "v1.4.0"},
		{"a dependency replaced by a folder", debug.BuildInfo{
			Main: *mod("example.com/shop", "(devel)", nil),
			Deps: []*debug.Module{mod(modulePath, "v0.0.0", mod("../idemgen", "", nil))},
		}, "(devel)"},
		{"not found", debug.BuildInfo{Main: *mod("example.com/other", "v1.0.0", nil)}, "(devel)"},
	} {
		if got := moduleVersion(&tc.bi); got != tc.want {
			t.Errorf("%s: moduleVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}
