// Command none links database/sql and no SQLite driver: the baseline of cold.sh's builds
// (with no driver registered, it prints sql.Open's error).
package main

import (
	"database/sql"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: none FILE")
		os.Exit(2)
	}
	db, err := sql.Open("sqlite", "file:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT sqlite_version()").Scan(&v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(v)
}
