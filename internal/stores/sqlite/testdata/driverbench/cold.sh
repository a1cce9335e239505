#!/usr/bin/env bash
# Cold builds: each of ./cold/none (database/sql only), ./cold/modernc and
# ./cold/ncruces built with an empty GOCACHE of its own (the standard library
# is compiled too; the module cache may stay warm: downloads are not measured),
# under the bench lock. Prints one line per build: wall, CPU (user+sys)
# seconds, peak memory, binary size, load average before and after.
# Usage: bash cold.sh [ROUNDS] [-race]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export GOWORK=off # a module of its own, outside the repository's go.work
rounds=${1:-2}
race=${2:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'round\tprogram\twall\tcpu_s\tmax_rss_kb\tbinary_bytes\tload_before\tload_after\n'
for r in $(seq "$rounds"); do
	progs="none modernc ncruces"
	[ $((r % 2)) = 0 ] && progs="ncruces modernc none"
	for p in $progs; do
		cache=$(mktemp -d)
		before=$(cut -d' ' -f1-3 /proc/loadavg)
		flock /tmp/idemgen-bench.lock env GOCACHE="$cache" /usr/bin/time -v -o "$out/time" \
			go build $race -o "$out/bin" "./cold/$p"
		after=$(cut -d' ' -f1-3 /proc/loadavg)
		rm -rf "$cache"
		field() { grep "$1" "$out/time" | awk '{print $NF}'; }
		cpu=$(awk -v u="$(field "User time")" -v s="$(field "System time")" 'BEGIN { print u + s }')
		printf '%s\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$p" "$race" "$(field 'Elapsed (wall')" "$cpu" \
			"$(field 'Maximum resident')" "$(stat -c %s "$out/bin")" "$before" "$after"
	done
done
