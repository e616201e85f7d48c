#!/bin/bash
# The store benchmark on a GPU host, as recorded in docs/benchmarks-store.md:
# the host-side planning timed alone (plan_bench, CPU only), the store
# benchmark on the module under test (1,024 lists, full; 4,096 lists,
# mutations and memory only), optionally the same mutation benchmark on a
# previous module for a before/after on the same machine, and optionally
# the CUDA differential test.  Logs go to OUTDIR.
#
#   bash bench/store/gpu-run.sh OUTDIR [NEW.so] [OLD.so]
#   GI_RUN_DIFF=1   also run test/gpu/test_cuda_backend.run on NEW.so
#   GI_RUN_4096=0   skip the 4,096-list run
#   GI_OLD_SEARCH=1 run the old module's search sweep too
#   GI_OLD_BENCH=PATH  the bench_store.run that OLD.so speaks to (built from
#                   the old tree when OLD.so predates this gi_backend.h)
#
# Builds nothing: bench_store.run, plan_bench.run (make -C bench/store all
# plan) and test_cuda_backend.run (make -C test/gpu) come prebuilt.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:?usage: gpu-run.sh OUTDIR [NEW.so] [OLD.so]}
new=${2:-$top/gpuindex_cuda.so}
old=${3:-}
mkdir -p "$out"
status=0

{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null
	nvcc --version 2>/dev/null | tail -2
	nproc
	lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|L3"
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

echo "== plan_bench (host side alone)"
timeout 120 "$here/plan_bench.run" >"$out/plan_bench.txt" 2>&1 || status=1
tail -n 8 "$out/plan_bench.txt"

echo "== bench_store, new module, 1,024 lists"
mkdir -p "$out/new1024"
BENCH_N=1000000 timeout 300 "$here/bench_store.run" "$new" "$out/new1024" >"$out/bench_new_1024.txt" 2>&1 || status=1
grep -E "ingest|memory|delete|window|profile" "$out/bench_new_1024.txt" | cut -c1-260

if [ -n "$old" ]; then
	# GI_OLD_SEARCH=1: the old module's search sweep too (a search change)
	skip=(BENCH_SKIP_SEARCH=1)
	[ -n "${GI_OLD_SEARCH:-}" ] && skip=()
	echo "== bench_store, old module, 1,024 lists ${skip[*]}"
	env "${skip[@]}" BENCH_N=1000000 timeout 300 "${GI_OLD_BENCH:-$here/bench_store.run}" "$old" >"$out/bench_old_1024.txt" 2>&1 || status=1
	grep -E "ingest|memory|delete|window" "$out/bench_old_1024.txt" | cut -c1-260
fi

if [ "${GI_RUN_4096:-1}" = 1 ]; then
	echo "== bench_store, new module, 4,096 lists, mutations only"
	BENCH_N=1000000 BENCH_LISTS=4096 BENCH_SKIP_SEARCH=1 timeout 200 "$here/bench_store.run" "$new" >"$out/bench_new_4096.txt" 2>&1 || status=1
	grep -E "ingest.*wall|memory|delete|window.*wall" "$out/bench_new_4096.txt" | cut -c1-260
fi

if [ -n "${GI_RUN_DIFF:-}" ]; then
	echo "== CUDA differential test"
	timeout 300 "$top/test/gpu/test_cuda_backend.run" "$new" >"$out/differential.txt" 2>&1 || status=1
	grep -E "^\[ (OK|FAIL|SKIP)|passed|hits compared" "$out/differential.txt"
fi
exit $status
