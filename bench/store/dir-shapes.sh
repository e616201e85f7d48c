#!/bin/bash
# The directory scan's shapes at the store, no PostgreSQL: for each profile
# (batch:probes:searches:k) one bench_store.run process builds the store and
# searches every shape (blocks an SM x words a lane loads at a time) in turns
# (BENCH_DIR_SHAPES, bench_store.c); each shape's p50 and p90 and the hits
# that differ from the first shape's go to OUTDIR/dir-shapes.csv, then a
# table and plot (dir_shapes_report.py) to OUTDIR/dir-shapes.{md,png}.
#
#   bash bench/store/dir-shapes.sh OUTDIR MODULE.so
#   DS_SHAPES ["1x16 0x0 1x64 2x32 1x32": 0 takes the default's choice for that part;
#             "tiles": the multi-query tiles, e.g. DS_SHAPES="0x0 tiles" for batches of 8-32;
#             "tilesN": N slabs of a list a tile block, "tiles-1" a block a tile on the chain]
#   DS_PROFILES ["1:32:600:10 2:32:400:10 4:32:300:10 8:32:300:10 1:16:600:10 32:32:150:10"]
#   BENCH_N [450000]  BENCH_LISTS [700]
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: dir-shapes.sh OUTDIR MODULE.so}
so=${2:?module}
mkdir -p "$out"
export BENCH_N=${BENCH_N:-450000} BENCH_LISTS=${BENCH_LISTS:-700}
export BENCH_DIR_SHAPES=${DS_SHAPES:-1x16 0x0 1x64 2x32 1x32}
csv=$out/dir-shapes.csv
echo "profile,shape,p50_ms,p90_ms,hits_differ" >"$csv"
for prof in ${DS_PROFILES:-1:32:600:10 2:32:400:10 4:32:300:10 8:32:300:10 1:16:600:10 32:32:150:10}; do
	BENCH_PROFILE=$prof timeout 300 "$here/bench_store.run" "$so" >"$out/run.txt" 2>&1 ||
		{ echo "profile $prof failed:"; tail -5 "$out/run.txt"; continue; }
	grep '^dir shape' "$out/run.txt"
	awk -v p="$prof" '/^dir shape/ {print p "," $3 "," $(NF-7) "," $(NF-4) "," $(NF-2)}' \
		"$out/run.txt" >>"$csv"
done
rm -f "$out/run.txt"
python3 "$here/dir_shapes_report.py" "$csv" "$out/dir-shapes" \
	"Store level (bench_store.run), N $BENCH_N, lists $BENCH_LISTS; each profile is batch:probes:searches:k; the shapes in turns within one process, a fresh batch each round."
