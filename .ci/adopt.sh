#!/usr/bin/env bash
# Adopts idemgen in a fresh module the way README's "Adding idemgen to your
# project" says, from this clone (the module is not published yet, so the
# recipe is the go mod edit -replace one): writes a spec with one annotated
# operation, runs its go:generate line (-dialect sqlite), builds and serves a
# tiny main on 127.0.0.1, sends the same request twice and checks that the
# second is a replay (Idempotent-Replayed: true).
# Usage (from anywhere): bash .ci/adopt.sh    (about 30 s with a warm build cache)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() { printf 'adopt FAILED: %s\n' "$*" >&2; exit 1; }

# A user's module knows nothing of this repository's workspace or flags;
# the recipe needs no -mod=mod.
export GOWORK=off GOFLAGS=
cd "$work"
go mod init example.com/shop >/dev/null 2>&1

# Step 1 of the README, before publication.
go mod edit -replace "github.com/idemgen/idemgen=$repo" \
	-require github.com/idemgen/idemgen@v0.0.0 \
	-tool github.com/idemgen/idemgen/cmd/idemgen
go mod tidy

# Step 2: a spec and the go:generate line.
cat >openapi.yaml <<'YAML'
openapi: 3.0.3
info: {title: shop, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent:
        key: {header: Idempotency-Key}
        ttl: 1h
      requestBody:
        content:
          application/json:
            schema: {type: object}
      responses:
        "201": {description: created}
YAML
cat >gen.go <<'GO'
package main

//go:generate go tool idemgen generate -spec openapi.yaml -out internal/idem -package idem -dialect sqlite
GO
go generate ./...
ls internal/idem/idemgen_store.go >/dev/null || fail "go generate wrote no store"

# Step 3: a main that wires the middleware (SQLite through modernc.org/sqlite).
cat >main.go <<'GO'
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	_ "modernc.org/sqlite"

	idemrt "github.com/idemgen/idemgen/runtime"

	"example.com/shop/internal/idem"
)

func main() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+os.Args[1]+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	if err := idem.ApplySchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	store, err := idem.NewStore(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idem.Middleware(idemrt.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d\n", n.Add(1))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr())
	log.Fatal(http.Serve(ln, mw(mux)))
}
GO
# The new imports (the runtime, the SQLite driver) need go.sum entries:
# without this tidy, go build says "missing go.sum entry".
go mod tidy
go build -o shop .

./shop "$work/shop.db" >addr 2>server.log &
pid=$!
for _ in $(seq 1 100); do
	[ -s addr ] && break
	kill -0 "$pid" 2>/dev/null || fail "server exited: $(cat server.log)"
	sleep 0.1
done
[ -s addr ] || fail "server did not print its address"
url="http://$(head -n1 addr)/orders"

post() { curl -sS -D "$1" -o "$2" -X POST "$url" -H 'Idempotency-Key: k-1' -H 'Content-Type: application/json' -d '{"item":"book"}'; }
post h1 b1
post h2 b2
grep -q '^HTTP/1.1 201' h1 || fail "first request: $(cat h1 b1)"
grep -qi '^Idempotent-Replayed: true' h1 && fail "first request claims to be a replay"
grep -q '^HTTP/1.1 201' h2 || fail "second request: $(cat h2 b2)"
grep -qi '^Idempotent-Replayed: true' h2 || fail "second request is not a replay: $(cat h2)"
cmp -s b1 b2 || fail "replayed body differs: $(cat b1) vs $(cat b2)"
echo "adopt: fresh module generated, built and served; the retry was replayed ($(tr -d '\n' <b2))"
