#!/bin/bash
# The CUDA IVF-PQ search alone (bench_pq.run) with two or more builds of the module, in
# turns on one GPU host (the same state layout: builds of one tree's bench):
#
#   bash bench/store/pq-ab.sh OUT NAME=MODULE.so NAME=MODULE.so [...]
#   PQAB_ROUNDS [2]  PQAB_CONFIGS ["l2:32:8 l2:8:8 ip:32:8 l2:32:4 l2:8:4": metric:probes:bits]
#
# Each round runs every config with every module; the log goes to OUT/pq-ab.log and
# pq_ab_table.py turns it into OUT/pq-ab.{csv,md,png} (medians over the rounds, ratios to
# the first module).
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { echo "usage: $0 OUT NAME=MODULE.so NAME=MODULE.so ..." >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
shift
[ -x "$here/bench_pq.run" ] || make -s -C "$here" bench_pq.run || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>/dev/null
date -u +%FT%TZ >> "$out/gpu.txt"
for round in $(seq 1 "${PQAB_ROUNDS:-2}"); do
	for cfg in ${PQAB_CONFIGS:-l2:32:8 l2:8:8 ip:32:8 l2:32:4 l2:8:4}; do
		IFS=: read -r metric probes bits <<<"$cfg"
		for mod in "$@"; do
			name=${mod%%=*}
			so=$(cd "$(dirname "${mod#*=}")" && pwd)/$(basename "${mod#*=}")
			echo "## $name metric $metric probes $probes bits $bits round $round"
			BENCH_METRIC=$metric BENCH_PROBES=$probes BENCH_BITS=$bits timeout 120 \
				"$here/bench_pq.run" "$so" | grep "^| [a-z]"
		done
	done
done | tee "$out/pq-ab.log"
python3 "$here/pq_ab_table.py" "$out/pq-ab.log" "$out/pq-ab"
