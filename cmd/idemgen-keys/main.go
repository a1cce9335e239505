// Command idemgen-keys is `idemgen keys`: inspect, release and purge one
// idempotency record in a PostgreSQL, MySQL/MariaDB, SQLite or Redis
// store. It is a command of its own so that idemgen, which go:generate
// lines build with go run, links no database driver; idemgen keys runs it.
//
//	go install github.com/idemgen/idemgen/cmd/idemgen-keys
//	idemgen keys inspect -dsn postgres://... -op createCharge -principal acct_1 -key K
package main

import (
	"context"
	"os"

	"github.com/idemgen/idemgen/cmd/idemgen-keys/internal/keystool"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "keys" { // run as idemgen keys ...
		args = args[1:]
	}
	os.Exit(keystool.Run(context.Background(), args, os.Stdout, os.Stderr))
}
