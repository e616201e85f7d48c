#!/bin/bash
# Two settings of a session against each other with pgbench on one cluster: search q/s
# (prepared, one query per statement) with PGOPTIONS A and B alternating in rounds.
#   bash bench/pgbench/settings-ab.sh OUTDIR NAME_A "OPTIONS_A" NAME_B "OPTIONS_B"
# e.g. on "-c gpuindex.limit_hint=on" off "-c gpuindex.limit_hint=off"; OPTIONS of the
# form "sighup:GUC=VALUE" set a server-wide setting instead (ALTER SYSTEM and a reload
# before the setting's runs), e.g. "sighup:gpuindex.service_overlap=off".  Writes
# OUTDIR/settings-ab.csv (round, setting, limit, clients, qps) and device.txt;
# report.py makes the table and plot.  GPU host: carry .gpuhost/debs; BENCH_LOCAL_PG=1 for
# this machine's PostgreSQL and the host backend (bench/pgbench/cluster.sh).
# SAB_ROWS [200000] SAB_LISTS [450] SAB_PROBES [16] SAB_CASES ["10:1 10:8 100:1": LIMIT:clients]
# SAB_ROUNDS [4] PGB_SECONDS [5] SAB_NAME [settings: the cluster's name] SAB_PORT [55443]
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:?usage: settings-ab.sh OUTDIR NAME_A OPTS_A NAME_B OPTS_B}" && cd "$1" && pwd)
names=("${2:?}" "${4:?}") opts=("${3:?}" "${5:?}")
. bench/pgbench/cluster.sh
rows=${SAB_ROWS:-200000}
cases=${SAB_CASES:-10:1 10:8 100:1}
pgb_cluster "${SAB_NAME:-settings}" "${SAB_PORT:-55443}"
pgb_table "$rows" "${SAB_LISTS:-450}" "${SAB_PROBES:-16}"
for c in $cases; do
	l=${c%%:*}
	printf '\\set id random(1, %s)\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = :id) LIMIT %s;\n' \
		"$rows" "$l" >$D/q$l.sql
done
chown $PG_USER $D/q*.sql
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo host, $(nproc) cores); $rows x 128 random rows, ${SAB_LISTS:-450} lists, probes ${SAB_PROBES:-16}" | tee $OUT/device.txt
{ echo "round,setting,limit,clients,qps"
for r in $(seq 1 "${SAB_ROUNDS:-4}"); do
	for i in 0 1; do
		o=${opts[$i]}
		case $o in sighup:*)
			g=${o#sighup:}
			echo "ALTER SYSTEM SET ${g%%=*} = '${g#*=}'; SELECT pg_reload_conf();" | sql >/dev/null
			sleep 1
			o= ;;
		esac
		for c in $cases; do
			l=${c%%:*} n=${c##*:}
			echo "$r,${names[$i]},$l,$n,$(pgb_tps $n q$l.sql "$o")"
		done
	done
done; } | tee $OUT/settings-ab.csv
run "pg_ctl -D $D/data -m fast stop >/dev/null"
