#!/bin/bash
# Search q/s with the first search sized by the LIMIT (gpuindex.limit_hint = on) and by
# gpuivf.scan_batch (off), pgbench on one cluster, the two alternating in rounds:
# LIMIT 10 with 1 and 8 clients, LIMIT 100 with 1 client (a control: both ask for 100).
# 200K x 128 random rows, 450 lists, probes 16.  report.py makes the table and plot.
#   bash bench/limit-hint/run.sh OUTDIR   (GPU host: carry .gpuhost/debs)
#   BENCH_LOCAL_PG=1 bash bench/limit-hint/run.sh OUTDIR   (this machine's PostgreSQL)
# LH_ROUNDS [4], PGB_SECONDS [5], LH_ROWS [200000]
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:?usage: run.sh OUTDIR}" && cd "$1" && pwd)
. bench/pgbench/cluster.sh
rows=${LH_ROWS:-200000}
pgb_cluster limit 55443
pgb_table "$rows" 450 16
for l in 10 100; do
	printf '\\set id random(1, %s)\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = :id) LIMIT %s;\n' \
		"$rows" $l >$D/q$l.sql
done
chown $PG_USER $D/q*.sql
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo host, $(nproc) cores)" | tee $OUT/device.txt
{ echo "round,limit_hint,limit,clients,qps"
for r in $(seq 1 "${LH_ROUNDS:-4}"); do
	for h in on off; do
		for c in 1 8; do echo "$r,$h,10,$c,$(pgb_tps $c q10.sql "-c gpuindex.limit_hint=$h")"; done
		echo "$r,$h,100,1,$(pgb_tps 1 q100.sql "-c gpuindex.limit_hint=$h")"
	done
done; } | tee $OUT/limit-hint.csv
run "pg_ctl -D $D/data -m fast stop >/dev/null"
