package mysql

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
	helperEnv = "IDEMGEN_MYSQL_HELPER"
	dsnEnv    = "IDEMGEN_MYSQL_DSN"
)

// helperMain runs in a helper process, on the database of dsnEnv.
func helperMain(mode string) int {
	ctx := context.Background()
	conn, err := sql.Open("mysql", os.Getenv(dsnEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	conn.SetMaxOpenConns(8)
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

// starter starts helper processes on db's database.
func (db *testDB) starter() func(t *testing.T, mode, key string) *harness.Child {
	return func(t *testing.T, mode, key string) *harness.Child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode, harness.ChildKeyEnv+"="+key, dsnEnv+"="+db.cfg.FormatDSN())
		return harness.Start(t, cmd)
	}
}
