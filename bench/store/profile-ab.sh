#!/bin/bash
# One CUDA module against another at the store, no PostgreSQL: bench_store.run's
# profile mode (BENCH_PROFILE=B:P:R:K, R searches of a batch of B queries at P
# probes and k K after the build) on each module in turn, in rounds, each run's
# p50 a row of OUTDIR/profile-ab.csv; then bench/ab/report.py's table and plot
# (medians over rounds, new / old) as OUTDIR/profile-ab.{md,png}.
#
#   bash bench/store/profile-ab.sh OUTDIR OLD.so NEW.so
#   PAB_ROUNDS [2]  PAB_PROFILES ["1:32:300:10 1:32:300:100 8:32:150:10 8:32:150:100"]
#   BENCH_N [450000]  BENCH_LISTS [700]  (bench_store.run's own settings)
#   PAB_PYTHON [python3] (needs matplotlib for the plot; the table without it)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: profile-ab.sh OUTDIR OLD.so NEW.so}
old=${2:?old module}
new=${3:?new module}
mkdir -p "$out"
export BENCH_N=${BENCH_N:-450000} BENCH_LISTS=${BENCH_LISTS:-700}
csv=$out/profile-ab.csv
echo "variant,step,clients,unit,value,md5" >"$csv"
for r in $(seq 1 "${PAB_ROUNDS:-2}"); do
	for v in old new; do
		so=$new
		[ $v = old ] && so=$old
		for prof in ${PAB_PROFILES:-1:32:300:10 1:32:300:100 8:32:150:10 8:32:150:100}; do
			IFS=: read -r B P R K <<<"$prof"
			BENCH_PROFILE=$prof timeout 120 "$here/bench_store.run" "$so" >"$out/run.txt" 2>&1
			p50=$(awk '/^profile search/ {print $(NF-1)}' "$out/run.txt" | sort -n |
				awk '{a[NR]=$1} END {if (NR) print a[int(NR/2)+1]}')
			echo "$v round $r batch $B probes $P k $K: p50 ${p50:-none} ms"
			echo "$v,batch $B probes $P k $K,,ms,$p50," >>"$csv"
		done
	done
done
rm -f "$out/run.txt"
"${PAB_PYTHON:-python3}" "$here/../ab/report.py" "$csv" "$out/profile-ab" \
	"Store level (bench_store.run), N $BENCH_N, lists $BENCH_LISTS; p50 of each run's searches (ms), medians over ${PAB_ROUNDS:-2} rounds; old $old, new $new."
