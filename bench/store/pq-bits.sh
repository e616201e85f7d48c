#!/bin/bash
# The CUDA IVF-PQ search alone (bench_pq.run) for 8-bit and 4-bit codes, and an older
# module's 8-bit search beside it, in turns, on one GPU host:
#
#   bash bench/store/pq-bits.sh OUT OLD_DIR [ROUNDS]
#
# OLD_DIR holds an older tree's gpuindex_cuda.so and bench/store/bench_pq.run (built by
# that tree: its bench speaks its own state layout); this tree's are built here if
# missing.  For L2 and inner product at probes 8 and 32 (450K x 128 rows, 64 sub-spaces,
# 700 lists, 1,000 queries) each round runs old 8-bit, new 8-bit, new 4-bit; the log goes
# to OUT/bench_pq.log and bench/store/pq-bits-table.py turns it into OUT/pq-bits.{md,csv,png}.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 OUT OLD_DIR [ROUNDS]" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
old=$(cd "$2" && pwd)
rounds=${3:-2}
cd "$top"
[ -f gpuindex_cuda.so ] || make -s -j"$(nproc)" gpuindex_cuda.so
[ -x bench/store/bench_pq.run ] || make -s -C bench/store bench_pq.run
so=$top/gpuindex_cuda.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" || true
date -u >> "$out/gpu.txt"
{
for metric in l2 ip; do for probes in 8 32; do
	for round in $(seq 1 "$rounds"); do
		echo "## old module, 8-bit, $metric probes $probes round $round"
		BENCH_METRIC=$metric BENCH_PROBES=$probes "$old/bench_pq.run" "$old/gpuindex_cuda.so" | grep "^| [a-z]"
		for bits in 8 4; do
			echo "## new module, $bits-bit, $metric probes $probes round $round"
			BENCH_BITS=$bits BENCH_METRIC=$metric BENCH_PROBES=$probes bench/store/bench_pq.run "$so" |
				grep "^| [a-z]\|^memory"
		done
	done
done; done
} > "$out/bench_pq.log" 2>&1
python3 "$here/pq-bits-table.py" "$out/bench_pq.log" "$out"
