#!/bin/bash
# Search q/s with the first search sized by the LIMIT (gpuindex.limit_hint = on) and by
# gpuivf.scan_batch (off), pgbench on one cluster, the two alternating in rounds:
# LIMIT 10 with 1 and 8 clients, LIMIT 100 with 1 client (a control: both ask for 100).
# 200K x 128 random rows, 450 lists, probes 16 (bench/pgbench/settings-ab.sh).
#   bash bench/limit-hint/run.sh OUTDIR   (GPU host: carry .gpuhost/debs)
#   BENCH_LOCAL_PG=1 bash bench/limit-hint/run.sh OUTDIR   (this machine's PostgreSQL)
# then: python3 bench/pgbench/report.py OUTDIR/settings-ab.csv STEM [TITLE]
cd "$(dirname "$0")/../.." || exit 1
SAB_NAME=limit exec bash bench/pgbench/settings-ab.sh "${1:?usage: run.sh OUTDIR}" \
	on "-c gpuindex.limit_hint=on" off "-c gpuindex.limit_hint=off"
