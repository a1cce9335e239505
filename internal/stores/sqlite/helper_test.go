package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// helperEnv makes the test binary a helper process (see TestMain).
const (
	helperEnv = "IDEMGEN_SQLITE_HELPER"
	dsnEnv    = "IDEMGEN_SQLITE_DSN"
)

// helperMain runs in a helper process, on the database file of dsnEnv.
func helperMain(mode string) int {
	ctx := context.Background()
	conn, err := sql.Open("sqlite", os.Getenv(dsnEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	b, err := newBackend(ctx, conn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "storm" {
		return harness.ChildStorm(b, 25)
	}
	return harness.ChildMain(mode, b)
}

// starter starts helper processes on db's file.
func (db *testDB) starter() func(t *testing.T, mode, key string) *harness.Child {
	return func(t *testing.T, mode, key string) *harness.Child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode, harness.ChildKeyEnv+"="+key, dsnEnv+"="+db.dsn())
		return harness.Start(t, cmd)
	}
}
