#!/bin/bash
# Searches right after a write at the store, no PostgreSQL: for each profile
# (batch:probes:searches:k) one bench_store.run process (BENCH_AFTER_WRITE=1,
# after_write in bench_store.c) writes a row before every search and searches
# with the chain walk, the directory rebuilt and the automatic mode in turns;
# each way's p50 and p90 and the hits that differ from the chain walk's go to
# OUTDIR/after-write.csv, then a table and plot (dir_shapes_report.py) to
# OUTDIR/after-write.{md,png}.
#
#   bash bench/store/after-write.sh OUTDIR MODULE.so
#   AW_PROFILES ["1:32:300:10 1:16:300:10 4:32:200:10 8:32:150:10 32:32:100:10"]
#   BENCH_N [450000]  BENCH_LISTS [700]
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: after-write.sh OUTDIR MODULE.so}
so=${2:?module}
mkdir -p "$out"
export BENCH_N=${BENCH_N:-450000} BENCH_LISTS=${BENCH_LISTS:-700} BENCH_AFTER_WRITE=1
csv=$out/after-write.csv
echo "profile,shape,p50_ms,p90_ms,hits_differ" >"$csv"
for prof in ${AW_PROFILES:-1:32:300:10 1:16:300:10 4:32:200:10 8:32:150:10 32:32:100:10}; do
	BENCH_PROFILE=$prof timeout 300 "$here/bench_store.run" "$so" >"$out/run.txt" 2>&1 ||
		{ echo "profile $prof failed:"; tail -5 "$out/run.txt"; continue; }
	grep '^after a write' "$out/run.txt"
	# "after a write, WAY, batch ...: p50 X ms p90 Y ms, N hits differ"
	sed -n 's/^after a write, \([^,]*\), .*p50 \([0-9.]*\) ms p90 \([0-9.]*\) ms, \([0-9]*\) hits differ$/\1,\2,\3,\4/p' \
		"$out/run.txt" | sed "s/^/$prof,/" >>"$csv"
done
rm -f "$out/run.txt"
python3 "$here/dir_shapes_report.py" "$csv" "$out/after-write" \
	"Store level (bench_store.run, BENCH_AFTER_WRITE=1), N $BENCH_N, lists $BENCH_LISTS; each profile is batch:probes:searches:k; one stored row deleted and put back before every search, the three ways in turns within one process; p50 and p90 of the search call, the directory's rebuild included." \
	"Searches right after a write"
