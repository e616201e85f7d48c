#!/bin/bash
# Kernel durations of the store's searches, no PostgreSQL: for each profile
# (batch:probes:searches:k) bench_store.run's profile mode under Nsight Compute,
# only the kernels inside its "search" NVTX ranges, gpu__time_duration of each
# (caches and clocks left alone); then ncu_kernels.py's median per kernel and
# profile into OUTDIR/ncu-kernels.{csv,md}.  Raw ncu CSVs: OUTDIR/raw.tar.gz.
#
#   bash bench/store/ncu-kernels.sh OUTDIR MODULE.so
#   NK_PROFILES ["1:32:30:10 8:32:30:10 32:32:30:10 32:16:30:10"]
#   BENCH_N [450000]  BENCH_LISTS [700]  NCU [ncu on PATH, else /usr/local/cuda/bin/ncu]
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: ncu-kernels.sh OUTDIR MODULE.so}
so=${2:?module}
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
mkdir -p "$out/raw"
export BENCH_N=${BENCH_N:-450000} BENCH_LISTS=${BENCH_LISTS:-700}
for prof in ${NK_PROFILES:-1:32:30:10 8:32:30:10 32:32:30:10 32:16:30:10}; do
	f=$out/raw/$(echo "$prof" | tr : -)
	BENCH_PROFILE=$prof timeout 300 "$ncu" --nvtx --nvtx-include "search/" \
		--cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
		"$here/bench_store.run" "$so" >"$f.csv" 2>"$f.err" ||
		{ echo "profile $prof failed:"; tail -5 "$f.err"; }
done
python3 "$here/ncu_kernels.py" "$out/ncu-kernels" "$out"/raw/*.csv
# one file for the raw CSVs: a device call brings back only so many files
tar -czf "$out/raw.tar.gz" -C "$out" raw && rm -rf "$out/raw"
