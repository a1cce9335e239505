#!/bin/sh
# floor_pg.sh: what PostgreSQL itself allows the sweepers, without idemgen's
# code: pgbench runs the store's sweep statement (sweep.sql) on a table of
# ROWS expired records (fill.sql), with 1 client and then with 4 at once
# (each batch skips the rows the others hold, FOR UPDATE SKIP LOCKED, as the
# store does), REPS times alternately, and prints the deleted rows per
# second of each and their ratio. Then it measures one batch: EXPLAIN
# (ANALYZE, BUFFERS), and the CPU the server's backend spends per batch
# (from /proc/<backend pid>/schedstat, so the server must run on this
# machine) against the wall time per batch of one client.
#
#   IDEMGEN_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
#     flock /work/notes/bench.lock sh floor_pg.sh [ROWS [BATCH [REPS [CLIENTS]]]]
#
# Defaults: 200000 rows, batches of 500, 3 repetitions, 4 clients. ROWS
# must be a multiple of BATCH*CLIENTS. Everything happens in a schema of its
# own (sweepfloor_<pid>), dropped at the end.
set -eu
DSN=${IDEMGEN_TEST_POSTGRES:?set IDEMGEN_TEST_POSTGRES}
ROWS=${1:-200000}
BATCH=${2:-500}
REPS=${3:-3}
CLIENTS=${4:-4}
here=$(cd "$(dirname "$0")" && pwd)
schema=sweepfloor_$$
export PGOPTIONS="-c search_path=$schema"
psql="psql -qX -v ON_ERROR_STOP=1 $DSN"
$psql -c "CREATE SCHEMA $schema"
trap '$psql -c "DROP SCHEMA $schema CASCADE"' EXIT
$psql -f "$here/../../postgres/idemgen_schema.sql" >/dev/null

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC') floor_pg: $ROWS rows, batch $BATCH, 1 vs $CLIENTS clients; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $($psql -Atc 'SELECT version()')"

# run CLIENTS: fill, sweep the table empty with pgbench, print rows/s.
run() {
	c=$1
	$psql -v rows="$ROWS" -f "$here/fill.sql" >/dev/null
	per=$((ROWS / BATCH / c))
	t0=$(date +%s.%N)
	out=$(pgbench -n -M prepared -f "$here/sweep.sql" -D batch="$BATCH" -c "$c" -j "$c" -t "$per" "$DSN" 2>&1)
	t1=$(date +%s.%N)
	left=$($psql -Atc "SELECT count(*) FROM idempotency_keys")
	tps=$(echo "$out" | awk '/^tps = / {print $3}')
	lat=$(echo "$out" | awk '/^latency average/ {print $4}')
	awk -v c="$c" -v rows="$ROWS" -v left="$left" -v t0="$t0" -v t1="$t1" -v tps="$tps" -v b="$BATCH" -v lat="$lat" 'BEGIN {
		printf "clients=%d deleted=%d left=%d wall=%.3fs rows/s=%.0f (pgbench: %.1f batches/s = %.0f rows/s, latency %s ms)\n",
			c, rows - left, left, t1 - t0, (rows - left) / (t1 - t0), tps, tps * b, lat
	}'
	echo "$tps" >"$tmp/tps.$c"
}

tmp=$(mktemp -d)
trap '$psql -c "DROP SCHEMA $schema CASCADE"; rm -rf "$tmp"' EXIT
i=1
while [ "$i" -le "$REPS" ]; do
	run 1
	run "$CLIENTS"
	awk -v a="$(cat "$tmp/tps.1")" -v b="$(cat "$tmp/tps.$CLIENTS")" -v c="$CLIENTS" -v i="$i" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
		'BEGIN { printf "rep %d: %d clients / 1 client = %.2fx (load %s)\n", i, c, b / a, l }'
	i=$((i + 1))
done

# One batch, planned and executed: where its time goes.
$psql -v rows="$ROWS" -f "$here/fill.sql" >/dev/null
echo "# EXPLAIN (ANALYZE, BUFFERS) of one batch of $BATCH (rolled back)"
$psql -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS) DELETE FROM idempotency_keys
WHERE ctid IN (
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.sweep_at <= statement_timestamp() AND k.expires_at <= statement_timestamp()
    ORDER BY k.sweep_at
    LIMIT $BATCH
    FOR UPDATE SKIP LOCKED)
  AND sweep_at <= statement_timestamp() AND expires_at <= statement_timestamp()" -c "ROLLBACK"

# The backend's CPU per batch, one client, N batches of the prepared
# statement, each committed (synchronous_commit as configured).
n=$((ROWS / BATCH - 1))
{
	echo "SELECT pg_backend_pid() AS pid \\gset"
	echo "\\setenv BACKEND :pid"
	echo "PREPARE sweep(integer) AS $(grep -v '^--' "$here/sweep.sql" | sed 's/:batch::integer/$1/')"
	echo "EXECUTE sweep($BATCH);" # plan and warm up
	echo "\\! awk '{print \"cpu0\", \$1}' /proc/\$BACKEND/schedstat; date '+wall0 %s.%N'"
	j=0
	while [ "$j" -lt "$((n - 1))" ]; do
		echo "EXECUTE sweep($BATCH);"
		j=$((j + 1))
	done
	echo "\\! awk '{print \"cpu1\", \$1}' /proc/\$BACKEND/schedstat; date '+wall1 %s.%N'"
} >"$tmp/cpu.sql"
$psql -f "$tmp/cpu.sql" >"$tmp/cpu.out"
awk -v n="$((n - 1))" -v b="$BATCH" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" '
	{ v[$1] = $2 }
	END {
		cpu = (v["cpu1"] - v["cpu0"]) / 1e6 / n; wall = (v["wall1"] - v["wall0"]) * 1000 / n
		printf "one client, %d batches of %d: backend CPU %.2f ms/batch, wall %.2f ms/batch (CPU %.0f%% of wall; the rest is the commit flush, the client and waiting for a core) (load %s)\n", n, b, cpu, wall, 100 * cpu / wall, l
	}' "$tmp/cpu.out"
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
