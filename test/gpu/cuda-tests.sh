#!/bin/bash
# The CUDA backend's own tests on a GPU host (no PostgreSQL needed):
# the differential test against the host backend (harness.c and one
# test_*.c per store kind: store, IVF, posting lists, k-means, sparse,
# IVF-PQ),
# then the same under compute-sanitizer memcheck and racecheck (shorter
# runs: the sanitizers slow kernels down by 10-100x).
#
#   bash test/gpu/cuda-tests.sh [PATH/gpuindex_cuda.so] [LOGDIR]
#
# Exit status 0 when every part passed.  Each part's full output is in
# LOGDIR/<part>.log; the last lines are echoed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
so=${1:-$top/gpuindex_cuda.so}
logdir=${2:-/tmp/gpuindex-cuda-tests}
mkdir -p "$logdir"

# per-part time limits in seconds; GI_RACECHECK_ONE=1 runs one racecheck
t_diff=${GI_T_DIFF:-600}
t_mem=${GI_T_MEMCHECK:-600}
t_race=${GI_T_RACECHECK:-600}

make -s -C "$here" test_cuda_backend.run || [ -x "$here/test_cuda_backend.run" ] || exit 1
test=$here/test_cuda_backend.run

status=0
summary=""
part() {
	local name=$1 limit=$2
	shift 2
	echo "== $name"
	timeout "$limit" "$@" >"$logdir/$name.log" 2>&1
	local rc=$?
	tail -n 4 "$logdir/$name.log"
	# the failed tests and their first failed checks, which the tail may not show
	grep -E '^\[ FAIL \]|^  FAIL ' "$logdir/$name.log" | head -n 20
	if [ $rc = 0 ]; then
		summary+="$name: ok"$'\n'
	else
		summary+="$name: FAILED (exit $rc)"$'\n'
		status=1
	fi
}

part differential "$t_diff" "$test" "$so"
if command -v compute-sanitizer >/dev/null; then
	part memcheck "$t_mem" env GI_TEST_SCALE=0.1 \
		compute-sanitizer --tool memcheck --error-exitcode 1 "$test" "$so"
	# racecheck instruments every shared-memory access: the kernels that
	# use shared memory (radix select, top-k, merge) on small runs
	part racecheck "$t_race" env GI_TEST_SCALE=0.05 GI_TEST_NO_OOM=1 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "random differential, 1-slab"
	[ -n "${GI_RACECHECK_ONE:-}" ] || part racecheck-largek "$t_race" env GI_TEST_SCALE=0.05 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "large k"
	# multi-query tiles: per-query top-k buffers and queries in shared memory
	[ -n "${GI_RACECHECK_ONE:-}" ] || part racecheck-tiles "$t_race" env GI_TEST_SCALE=0.05 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "large batches"
	# k-means: block scans and reductions of the k-means++ pick, the update
	[ -n "${GI_RACECHECK_ONE:-}" ] || part racecheck-kmeans "$t_race" env GI_TEST_SCALE=0.05 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "k-means"
	# sparse: both scoring kernels (the document path's shared tile), the
	# select's block scans, the block bitonic sort, on exact ties
	# IVF-PQ: look-up tables in shared memory, the block's walk-ahead queue
	[ -n "${GI_RACECHECK_ONE:-}" ] || part racecheck-ivfpq "$t_race" env GI_TEST_SCALE=0.05 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "ivfpq"
	[ -n "${GI_RACECHECK_ONE:-}" ] || part racecheck-sparse "$t_race" env GI_TEST_SCALE=0.02 \
		compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 "$test" "$so" "sparse: exact ties"
else
	summary+="sanitizers: compute-sanitizer not found, skipped"$'\n'
fi

echo "== CUDA tests summary"
printf '%s' "$summary"
exit $status
