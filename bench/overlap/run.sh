#!/bin/bash
# Search q/s with the device service's rounds overlapping the device's searches
# (gpuindex.service_overlap = auto) and without (off), pgbench on one cluster, the two
# alternating in rounds: LIMIT 10 with 1, 8 and 32 clients; 200K x 128 random rows,
# 450 lists, probes 16 (bench/pgbench/settings-ab.sh).
#   bash bench/overlap/run.sh OUTDIR   (GPU host: carry .gpuhost/debs)
#   BENCH_LOCAL_PG=1 bash bench/overlap/run.sh OUTDIR   (this machine's PostgreSQL)
# then: python3 bench/pgbench/report.py OUTDIR/settings-ab.csv STEM [TITLE]
cd "$(dirname "$0")/../.." || exit 1
SAB_NAME=overlap SAB_CASES=${SAB_CASES:-10:1 10:8 10:32} exec bash bench/pgbench/settings-ab.sh \
	"${1:?usage: run.sh OUTDIR}" \
	auto "sighup:gpuindex.service_overlap=auto" off "sighup:gpuindex.service_overlap=off"
