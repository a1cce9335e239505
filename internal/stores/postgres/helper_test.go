package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// helperEnv makes the test binary a helper process (see TestMain).
const (
	helperEnv = "IDEMGEN_PG_HELPER"
	schemaEnv = "IDEMGEN_PG_SCHEMA"
)

// helperMain runs in a helper process, on the schema named by schemaEnv.
func helperMain(mode string) int {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("IDEMGEN_TEST_POSTGRES"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = os.Getenv(schemaEnv)
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	b, err := newBackend(ctx, pool)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "storm" {
		return harness.ChildStorm(b, 25)
	}
	return harness.ChildMain(mode, b)
}

// starter starts helper processes on db's schema.
func (db *testDB) starter() func(t *testing.T, mode, key string) *harness.Child {
	return func(t *testing.T, mode, key string) *harness.Child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode, harness.ChildKeyEnv+"="+key, schemaEnv+"="+db.schema)
		return harness.Start(t, cmd)
	}
}
