#!/bin/bash
# The sparse kind's GPU checks in one go, for a leased GPU machine with
# the module and the test programs built beforehand (make gpuindex_cuda.so,
# make -C test/gpu):
#   bash test/gpu/sparse-gpu.sh LOGDIR [parts...]
# parts: sparse (the sparse tests), diff (the whole differential),
# memcheck (compute-sanitizer memcheck on the sparse tests, scale 0.05),
# racecheck (each way of the term path forced, under racecheck, scale 0.02), bench50k (50K
# documents, batch 128), bench (50K / 128 and 1M / 500).  Each part's log
# is LOGDIR/<part>.log; a summary line per part at the end.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
logdir=${1:?LOGDIR}
shift
mkdir -p "$logdir"
so=$top/gpuindex_cuda.so
test=$here/test_cuda_backend.run
summary=""
run_part() {
	local name=$1 limit=$2
	shift 2
	local t0=$(date +%s)
	timeout "$limit" "$@" >"$logdir/$name.log" 2>&1
	local rc=$?
	summary+="$name: exit $rc, $(( $(date +%s) - t0 )) s; $(grep -E 'passed|ERROR SUMMARY|RACECHECK SUMMARY' "$logdir/$name.log" | tail -1)"$'\n'
	tail -n 25 "$logdir/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
for p in "$@"; do
	echo "== $p"
	case $p in
	sparse) run_part sparse 300 "$test" "$so" sparse ;;
	diff) run_part differential 400 "$test" "$so" ;;
	memcheck) run_part memcheck 300 env GI_TEST_SCALE=0.05 compute-sanitizer --tool memcheck \
		--error-exitcode 1 "$test" "$so" sparse ;;
	racecheck) run_part racecheck 300 env GI_TEST_SCALE=0.02 compute-sanitizer --tool racecheck \
		--racecheck-report hazard --error-exitcode 1 "$test" "$so" "sparse: each way of the term path forced" ;;
	bench50k) run_part bench50k 200 "$here/bench_sparse.run" "$so" 50000 128 ;;
	bench) run_part bench 500 "$here/bench_sparse.run" "$so" 50000 128 1000000 500 ;;
	esac
done
echo "== summary"
printf '%s' "$summary"
