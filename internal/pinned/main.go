// Command pinned runs a tool pinned in the repository's tools.mod (sqlc,
// oapi-codegen, ogen) with its arguments, in the current folder, for the
// //go:generate lines of every module of the repository:
//
//	//go:generate go run github.com/idemgen/idemgen/internal/pinned sqlc generate -f postgres/idemgen_sqlc.yaml
//
// It is `go tool -modfile=ROOT/tools.mod NAME ARGS`, where ROOT is the
// nearest folder above the current one that holds tools.mod, run outside
// the workspace (GOWORK=off): the go command refuses -modfile in workspace
// mode, and go.work at the root joins the repository's modules.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run github.com/idemgen/idemgen/internal/pinned TOOL [ARGS]  (a tool of tools.mod)")
		os.Exit(2)
	}
	tools, err := toolsMod()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pinned %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + tools}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintf(os.Stderr, "pinned %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// toolsMod is the path of the nearest tools.mod in the current folder or
// above it.
func toolsMod() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools.mod")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools.mod in the current folder or above it")
		}
		dir = parent
	}
}
