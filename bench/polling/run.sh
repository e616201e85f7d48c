#!/bin/bash
# Search q/s of 1, 8 and 32 clients (pgbench, 200K x 128 random rows, 450 lists, probes 16)
# with the default polling (gpuindex.service_spin_us 50, client_spin_us 100) and with longer
# polling (300, 400), alternating in 4 rounds on one cluster; report.py makes the table and
# plot from spin.csv.  For a GPU host:
#   bash bench/polling/run.sh OUTDIR   (carry .gpuhost/debs; writes OUTDIR/spin.csv)
#   POLL_CLIENTS ["1 8 32"]  POLL_ROUNDS [4]
#   POLL_CONFIGS ["50 100,300 400": service_spin_us and client_spin_us pairs, comma-separated]
#   POLL_ROWS [200000]  POLL_LISTS [450]  POLL_PROBES [16]
#   BENCH_LOCAL_PG=1: this machine's PostgreSQL and the host backend (bench/pgbench/cluster.sh)
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:?usage: run.sh OUTDIR}" && cd "$1" && pwd)
. bench/pgbench/cluster.sh
pgb_cluster spin 55441
pgb_table ${POLL_ROWS:-200000} ${POLL_LISTS:-450} ${POLL_PROBES:-16}
printf '\\set id random(1, '${POLL_ROWS:-200000}')\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = :id) LIMIT 10;\n' > $D/q.sql
chown $PG_USER $D/q.sql
{ echo "round,service_spin_us,client_spin_us,clients,qps"
for r in $(seq 1 "${POLL_ROUNDS:-4}"); do
	IFS=, read -ra cfgs <<<"${POLL_CONFIGS:-50 100,300 400}"
	for cfg in "${cfgs[@]}"; do
		set -- $cfg
		echo "ALTER SYSTEM SET gpuindex.service_spin_us = $1; SELECT pg_reload_conf();" | sql >/dev/null
		sleep 1
		for c in ${POLL_CLIENTS:-1 8 32}; do echo "$r,$1,$2,$c,$(pgb_tps $c q.sql "-c gpuindex.client_spin_us=$2")"; done
	done
done; } | tee $OUT/spin.csv
run "pg_ctl -D $D/data -m fast stop >/dev/null"
