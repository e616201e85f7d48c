#!/bin/bash
# Search q/s and latency while another session inserts, against searches alone: pgbench
# (prepared, LIMIT 10, one query per statement) on one cluster, the two alternating in
# rounds; the writer is a second pgbench at a fixed rate copying stored vectors into new
# rows (one row a transaction, so every search may follow a change of the index).
#   bash bench/under-writes/run.sh OUTDIR   (GPU host: carry .gpuhost/debs)
#   BENCH_LOCAL_PG=1 bash bench/under-writes/run.sh OUTDIR   (this machine's PostgreSQL)
# Writes OUTDIR/under-writes.csv (round, setting, limit, clients, qps, latency_ms,
# writes_per_s), then bench/pgbench/report.py's table and plot of the q/s.
# UW_ROWS [200000] UW_LISTS [450] UW_PROBES [16] UW_CLIENTS ["1 8"] UW_RATE [500: inserts/s]
# UW_ROUNDS [4] PGB_SECONDS [5]
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:?usage: run.sh OUTDIR}" && cd "$1" && pwd)
. bench/pgbench/cluster.sh
rows=${UW_ROWS:-200000} rate=${UW_RATE:-500} secs=${PGB_SECONDS:-5}
pgb_cluster writes 55447
pgb_table "$rows" "${UW_LISTS:-450}" "${UW_PROBES:-16}"
echo "CREATE SEQUENCE ins START 100000000;" | sql >/dev/null
printf '\\set id random(1, %s)\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = :id) LIMIT 10;\n' \
	"$rows" >$D/q.sql
printf '\\set id random(1, %s)\nINSERT INTO t SELECT nextval('"'ins'"'), v FROM t WHERE id = :id;\n' \
	"$rows" >$D/w.sql
chown $PG_USER $D/q.sql $D/w.sql
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo host, $(nproc) cores); $rows x 128 random rows, ${UW_LISTS:-450} lists, probes ${UW_PROBES:-16}; writer $rate inserts/s" | tee $OUT/device.txt
# one search run of $1 clients: "qps,latency_ms"
search() {
	run "pgbench -h $D -p $PGB_PORT -n -M prepared -c $1 -j $1 -T $secs -f q.sql postgres" 2>&1 |
		awk '/^latency average/ {l = $4} /^tps = / {t = $3} END {print t "," l}'
}
{ echo "round,setting,limit,clients,qps,latency_ms,writes_per_s"
for r in $(seq 1 "${UW_ROUNDS:-4}"); do
	for c in ${UW_CLIENTS:-1 8}; do
		echo "$r,searches alone,10,$c,$(search $c),0"
		run "pgbench -h $D -p $PGB_PORT -n -M prepared -c 1 -j 1 -R $rate -T $((secs + 2)) -f w.sql postgres" \
			>$OUT/writer.txt 2>&1 &
		sleep 1
		res=$(search $c)
		wait
		w=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' $OUT/writer.txt)
		echo "$r,with $rate inserts/s,10,$c,$res,$w"
	done
done; } | tee $OUT/under-writes.csv
run "pg_ctl -D $D/data -m fast stop >/dev/null"
python3 bench/pgbench/report.py $OUT/under-writes.csv $OUT/under-writes \
	"Search q/s with and without a writer ($rate inserts/s), LIMIT 10" || true
