// Command idemgen generates idempotent net/http wrappers and their SQL key
// store from the x-idempotent annotations of an OpenAPI document.
//
//	//go:generate go tool idemgen generate -spec ../../openapi.yaml -out . -package idem -dialect postgres
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
