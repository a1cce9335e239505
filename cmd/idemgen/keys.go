package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/idemgen/idemgen/generator"
)

// keysTool is the command that `idemgen keys` runs. The keys tool links
// the PostgreSQL, MySQL, SQLite and Redis drivers (about 50 s more of a
// cold build, mostly modernc.org/sqlite), so it is a command of its own:
// idemgen, which go:generate lines build with go run, stays light.
const keysTool = "idemgen-keys"

// runKeys runs idemgen-keys from idemgen's own folder, else from PATH.
func runKeys(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	path := ""
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), keysTool); isFile(p) {
			path = p
		}
	}
	if path == "" {
		p, err := exec.LookPath(keysTool)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen keys: the keys tool is the command %s (kept apart so that idemgen builds no database driver); install it with\n"+
				"  go install github.com/idemgen/idemgen/cmd/%s@%s\nor run it as go run github.com/idemgen/idemgen/cmd/%s %s ...\n",
				keysTool, keysTool, versionForInstall(), keysTool, firstOr(args, "help"))
			return exitUsage
		}
		path = p
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "idemgen keys: running %s: %v\n", path, err)
	return exitError
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func firstOr(args []string, def string) string {
	if len(args) > 0 {
		return args[0]
	}
	return def
}

// versionForInstall is the version to install idemgen-keys at: idemgen's
// own, or latest for a development build.
func versionForInstall() string {
	if v := generator.Version(); v != "" && v[0] == 'v' {
		return v
	}
	return "latest"
}
