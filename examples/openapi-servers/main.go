// Command openapi-servers serves one OpenAPI spec through a server generated
// by oapi-codegen or by ogen, wrapped by the middleware idemgen generates
// from the same spec's x-idempotent annotations. Records live in memory.
//
// What it shows: the generated routers serve the spec's paths without the
// base path of its servers (/v1), so the middleware must be told, or the
// router must serve /v1; idem.CheckCoverage proves the wiring (see
// e2e_test.go).
//
//	go run ./examples/openapi-servers                 # oapi-codegen, paths at the root: POST localhost:8082/orders
//	go run ./examples/openapi-servers -server ogen    # ogen, paths under /v1: POST localhost:8082/v1/orders
package main

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -spec openapi.yaml -out internal/idem -package idem -store=false
//go:generate go run github.com/idemgen/idemgen/internal/pinned oapi-codegen -config internal/oapi/oapi-codegen.yaml -o internal/oapi/oapi.gen.go openapi.yaml
//go:generate go run github.com/idemgen/idemgen/internal/pinned ogen -config internal/ogenapi/ogen.yml -target internal/ogenapi -package ogenapi -clean -loglevel error openapi.yaml

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("openapi-servers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8082", "address to serve on")
	kind := fs.String("server", serverOapiCodegen, "generated server: "+serverOapiCodegen+" or "+serverOgen)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	store := idemrt.NewMemoryStore()
	a, err := newApp(*kind, store, false)
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	go idemrt.RunSweeper(ctx, store, time.Minute, 1000)
	srv := &http.Server{Addr: *addr, Handler: a, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("listening", "addr", *addr, "server", *kind, "orders", "http://"+*addr+a.prefix+"/orders")
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}
