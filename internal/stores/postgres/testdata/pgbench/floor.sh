#!/bin/sh
# floor.sh measures, with pgbench (a C client, so no Go, HTTP or pool in the
# way), what the server alone allows for a first request's statements, next
# to the bare handler's INSERT (docs/performance-log.md, "PostgreSQL: the floor of a first request").
# Each script runs right after an INSERT run, and its ratio is to that run,
# so that a change of load hits both sides of a ratio alike.
#
#   sh floor.sh [rounds [seconds [scripts...]]]   (defaults: 5 rounds, 10 s)
#
# It creates (and drops at the end) the database $FLOOR_DB (default
# idemgen_floor) through libpq's environment (PGHOST defaults to 127.0.0.1,
# the loopback the benchmarks use; PGUSER to postgres). Output: one line per
# pair (round, script, INSERT tps, script tps, ratio, 1-minute load average
# after the pair), then min / median / max of each script's ratios.
set -eu
cd "$(dirname "$0")"
rounds=${1:-5}
seconds=${2:-10}
[ $# -gt 2 ] && shift 2 || set --
scripts=${*:-newkey newkey-handler newkey-tx minimal-tx minimal-tx-pipelined}
db=${FLOOR_DB:-idemgen_floor}
export PGHOST="${PGHOST:-127.0.0.1}" PGUSER="${PGUSER:-postgres}"

dropdb --if-exists "$db" 2>/dev/null
createdb "$db"
psql -q -X -v ON_ERROR_STOP=1 -d "$db" -f setup.sql >/dev/null

pgout=$(mktemp)
out=$(mktemp)
trap 'dropdb --if-exists "$db"; rm -f "$pgout" "$out"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
tps() {
	pgbench -n -M prepared -c 16 -j 2 -T "$seconds" -f "$1.sql" "$db" >"$pgout" 2>&1 || { cat "$pgout" >&2; exit 1; }
	grep -q 'number of failed transactions: 0' "$pgout" || { cat "$pgout" >&2; exit 1; }
	awk '/^tps = / { printf "%d", $3 }' "$pgout"
}

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), pgbench -n -M prepared -c 16 -j 2 -T $seconds"
printf 'round\tscript\tinsert/s\tscript/s\tratio\tload\n'
for round in $(seq "$rounds"); do
	for s in $scripts; do
		base=$(tps insert)
		got=$(tps "$s")
		line=$(awk -v r="$round" -v s="$s" -v b="$base" -v g="$got" -v l="$(load)" \
			'BEGIN { printf "%s\t%s\t%d\t%d\t%.2f\t%s", r, s, b, g, g / b, l }')
		echo "$line"
		echo "$line" >>"$out"
	done
done
echo "# end $(date -u '+%H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'script\tmin\tmedian\tmax\n'
for s in $scripts; do
	awk -F'\t' -v s="$s" '$2 == s { print $5 }' "$out" | sort -n |
		awk -v s="$s" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s\t%.2f\t%.2f\t%.2f\n", s, v[1], m, v[NR] }'
done
