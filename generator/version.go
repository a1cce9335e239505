package generator

import (
	"runtime/debug"
	"slices"
)

// modulePath is idemgen's Go module.
const modulePath = "github.com/idemgen/idemgen"

// Version is the version of the idemgen module in the running binary, as
// the generated files' headers and `idemgen version` report it: the
// module's tag or pseudo-version when it was built from a module version
// (go install ...@v1.2.3, or go tool / go run in a module that requires
// it), "(devel)" when it was built from a source tree (this repository, a
// replace directive naming a folder, a VCS-stamped build of a checkout).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return devel
	}
	return moduleVersion(bi)
}

const devel = "(devel)"

// moduleVersion finds idemgen's module in bi: the main module when idemgen
// is built from its own module, else the dependency (its replacement when
// replaced).
func moduleVersion(bi *debug.BuildInfo) string {
	if bi.Main.Path == modulePath {
		// A build of a checkout is stamped with the commit (v0.0.0-...,
		// +dirty when edited): that is no release, and go run, which does
		// not stamp, would write other headers from the same tree.
		if bi.Main.Version == "" || slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs" }) {
			return devel
		}
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path != modulePath {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version == "" { // replaced by a folder
			return devel
		}
		return m.Version
	}
	return devel
}
