package generator

import (
	"runtime/debug"
	"slices"
)

// modulePath is idemgen's Go module.
const modulePath = "github.com/idemgen/idemgen"

// Version is the version of the idemgen module in the running binary, as
// the generated files' markers and `idemgen version` report it: the version
// the build used (go install ...@v1.2.3, or the one a user's go.mod
// requires under go tool / go run, or its replacement's), "(devel)" when it
// was built from a source tree (this repository, a replace directive
// naming a folder, a VCS-stamped build of a checkout).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return devel
	}
	return moduleVersion(bi)
}

const devel = "(devel)"

// moduleVersion finds idemgen's module in bi: the main package's module
// when idemgen's command is the binary (go install, go tool, go run, even
// in a user's module), else the dependency (a program calling Generate),
// or its replacement when replaced.
func moduleVersion(bi *debug.BuildInfo) string {
	var m *debug.Module
	if bi.Main.Path == modulePath {
		// A build of a checkout is stamped with the commit (v0.0.0-...,
		// +dirty when edited): that is no release, and go run, which does
		// not stamp, would write other headers from the same tree.
		if slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs" }) {
			return devel
		}
		m = &bi.Main
	}
	for _, d := range bi.Deps {
		if m == nil && d.Path == modulePath {
			m = d
		}
	}
	if m == nil {
		return devel
	}
	if m.Replace != nil {
		m = m.Replace
	}
	if m.Version == "" { // a folder replacement says (devel)
		return devel
	}
	return m.Version
}
