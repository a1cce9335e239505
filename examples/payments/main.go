// Command payments is idemgen's example service: a small Stripe-like payments
// API (openapi.yaml) whose annotated operations are made idempotent by the
// code idemgen generates from the spec.
//
//	go run ./examples/payments                      # SQLite in ./payments.db, no setup
//	go run ./examples/payments -dsn postgres://...  # or PAYMENTS_DSN=mysql://root@tcp(127.0.0.1:3306)/test
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// idemgen.yaml lists the three generated packages, one per database.
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen spec -spec openapi.yaml -o published.yaml
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen spec -spec openapi.yaml -overlay -o published.overlay.yaml
//go:generate go run github.com/idemgen/idemgen/internal/pinned oapi-codegen -config internal/paymentsclient/oapi-codegen.yaml -o internal/paymentsclient/client.gen.go published.yaml

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
