#!/bin/sh
# floor_my.sh: what MariaDB (or MySQL 8) itself allows the sweepers, without
# idemgen's store (no pgbench there): the Go program myfloor fills the
# store's table with ROWS expired records and empties it with 1 client and
# then with 4 at once, REPS times alternately, with the store's batch (a
# READ COMMITTED transaction: SELECT ... FOR UPDATE SKIP LOCKED, DELETE by
# primary key, COMMIT), then with one DELETE that locks its batch with SKIP
# LOCKED in a derived table, and prints deleted rows per second and the
# ratio of each; and the server thread's CPU per batch of one client.
#
#   IDEMGEN_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' \
#     flock /work/notes/bench.lock sh floor_my.sh [ROWS [BATCH [REPS [CLIENTS]]]]
#
# Defaults: 100000 rows, batches of 500, 3 repetitions, 4 clients. Run from
# anywhere inside the module; the database (sweepfloor_<random>) is dropped
# at the end.
set -eu
: "${IDEMGEN_TEST_MYSQL:?set IDEMGEN_TEST_MYSQL}"
ROWS=${1:-100000}
BATCH=${2:-500}
REPS=${3:-3}
CLIENTS=${4:-4}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$here" && go build -o "$bin/myfloor" ./myfloor)
for mode in tx single; do
	"$bin/myfloor" -schema "$here/../../mysql/idemgen_schema.sql" -rows "$ROWS" -batch "$BATCH" \
		-reps "$REPS" -clients "$CLIENTS" -mode "$mode" -cpu
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
