#!/bin/bash
# One gpuindex.so against another on one cluster and the same index (not a test: nothing
# here runs in CI):
#
#   AB_OLD=TREE bash bench/ab/run.sh OUTDIR
#
# TREE is a source tree of the other gpuindex (e.g. a `git archive` extraction); its
# gpuindex.so is built (no CUDA unless AB_CUDA=1) and the two libraries take turns in
# AB_ROUNDS rounds (old first in odd rounds; the server restarted between them,
# gpuindex_cuda.so the installed one, or each tree's own with AB_CUDA=1).  The data: one
# table of AB_ROWS random AB_DIM-d rows (id bigint, seeded), a gpuivf index with AB_LISTS
# lists, AB_NQ random queries.  Each turn, with the heap and
# the index in shared buffers and gpuivf.probes = AB_PROBES:
#   batch   AB_REPS calls of gpuivf_search over all queries (k AB_K, key column id) after
#           two warm-up calls, each call's stages from gpuindex_search_stages(), and the
#           md5 of the first call's rows (the two libraries must give the same);
#   single  pgbench -M prepared, one query per statement (ORDER BY ... LIMIT 10, a random
#           one of the queries), AB_SECONDS seconds for each client count in AB_CLIENTS.
# Writes OUTDIR/ab.csv (every measurement), ab.md (medians, new / old) and ab.png (with
# matplotlib: BENCH_PYTHON, else bench/run.sh's virtual environment when it exists).
#
# Environment [default]: AB_ROWS [1000000] AB_DIM [32] AB_LISTS [2000] AB_PROBES [1]
#   AB_NQ [1000] AB_K [10] AB_ROUNDS [4] AB_REPS [7] AB_CLIENTS [1 8] AB_SECONDS [5]
#   AB_STEPS ["batch single"] AB_OLD [none: the installed library alone] AB_DEVICE [auto]
#   AB_CUDA [0; 1: the CUDA module is built too (nvcc) and swapped with gpuindex.so, for a
#   GPU host with AB_DEVICE=cuda and PG_CONFIG of the unpacked server]
#   AB_HOST_THREADS [1: on the host backend the service searches the next part of a batch
#   on one core while the session checks rows on another, as beside a GPU; 0 for pgbench
#   runs that should use every core] AB_PORT [55450] AB_DIR [/tmp/gpuindex-bench-ab]
#   AB_CONF [none: lines added to postgresql.conf, e.g. "gpuindex.client_spin_us = 100"]
#   AB_INDEX_OPTS [none: more index options, e.g. "quantizer = 'pq'"]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
[ $# -ge 1 ] || { echo "usage: bash bench/ab/run.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
rows=${AB_ROWS:-1000000}
dim=${AB_DIM:-32}
lists=${AB_LISTS:-2000}
probes=${AB_PROBES:-1}
nq=${AB_NQ:-1000}
k=${AB_K:-10}
rounds=${AB_ROUNDS:-4}
reps=${AB_REPS:-7}
clients=${AB_CLIENTS:-1 8}
seconds=${AB_SECONDS:-5}
steps=" ${AB_STEPS:-batch single} "
port=${AB_PORT:-55450}
device=${AB_DEVICE:-auto}
host_threads=${AB_HOST_THREADS:-1}
D=${AB_DIR:-/tmp/gpuindex-bench-ab}
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
# shellcheck source=../../test/lib.sh
. "$root/test/lib.sh"
lib=$($PG_CONFIG --pkglibdir)
want() { case $steps in *" $1 "*) return 0 ;; esac; return 1; }

rm -rf "$D"
pg_scratch "$D"
variants=new
cuda=${AB_CUDA:-0}
cp "$lib/gpuindex.so" "$D/new.so"
[ "$cuda" = 1 ] && cp "$lib/gpuindex_cuda.so" "$D/new_cuda.so"
if [ -n "${AB_OLD:-}" ]; then
	make -s -C "$AB_OLD" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" GPUINDEX_CUDA="$cuda" \
		>"$out/build-old.log" 2>&1
	cp "$AB_OLD/gpuindex.so" "$D/old.so"
	[ "$cuda" = 1 ] && cp "$AB_OLD/gpuindex_cuda.so" "$D/old_cuda.so"
	variants="old new"
fi
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"/*.so
# one variant's libraries into the server's library folder
install_variant() {
	cp "$D/$1.so" "$lib/gpuindex.so"
	[ "$cuda" = 1 ] && cp "$D/$1_cuda.so" "$lib/gpuindex_cuda.so"
	return 0
}

run() { as_pg "cd '$D'; $*"; }
stop() { run "pg_ctl -D '$D/data' -w stop >/dev/null 2>&1" || true; }
start() { run "pg_ctl -D '$D/data' -l '$D/server.log' -w start >/dev/null"; }
psql_() { run "psql -X -q -h '$D' -p $port -v ON_ERROR_STOP=1 $* postgres"; }

run "initdb -D '$D/data' >/dev/null 2>&1"
cat >>"$D/data/postgresql.conf" <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = $device
gpuindex.host_threads = $host_threads
port = $port
unix_socket_directories = '$D'
shared_buffers = 1GB
fsync = off
max_connections = 40
${AB_CONF:-}
CONF
cat >"$D/setup.sql" <<SQL
CREATE EXTENSION gpuindex;
SELECT setseed(0.7);
CREATE TABLE t (id bigint, v real[]) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, $dim) WHERE i > 0)
  FROM generate_series(1, $rows) i;
SET maintenance_work_mem = '1GB';
CREATE INDEX t_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = $lists${AB_INDEX_OPTS:+, $AB_INDEX_OPTS});
VACUUM ANALYZE t;
CREATE TABLE q AS SELECT j, ARRAY(SELECT random()::real FROM generate_series(1, $dim) WHERE j > 0) AS v
  FROM generate_series(1, $nq) j;
CREATE UNIQUE INDEX ON q (j);
CREATE TABLE qp AS SELECT array_agg(v ORDER BY j) AS b FROM q;
SQL
call="SELECT count(*) FROM gpuivf_search('t_idx', (SELECT b FROM qp), $k, 'id', NULL::bigint);"
{
	echo "SET gpuivf.probes = $probes;"
	echo "SELECT md5(string_agg(query || ':' || key, ',' ORDER BY query, distance, key))"
	echo "  FROM gpuivf_search('t_idx', (SELECT b FROM qp), $k, 'id', NULL::bigint);"
	echo "\\o /dev/null"
	echo "$call"
	for _ in $(seq 1 "$reps"); do
		echo "$call"
		echo "\\o"
		echo "SELECT string_agg(stage || '=' || us, ' ' ORDER BY stage) FROM gpuindex_search_stages()"
		echo " WHERE stage IN ('visibility', 'total', 'search', 'result rows');"
		echo "\\o /dev/null"
	done
} >"$D/call.sql"
printf '\\set j random(1, %d)\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM q WHERE j = :j) LIMIT 10;\n' \
	"$nq" >"$D/single.sql"
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"/*.sql
install_variant new
start
trap 'stop; install_variant new' EXIT
psql_ -f setup.sql >"$out/setup.log" 2>&1
heap_mb=$(psql_ -Atc "\"SELECT pg_relation_size('t') / 1048576\"")

csv=$out/ab.csv
echo "variant,round,step,clients,call,value,unit,md5" >"$csv"
for r in $(seq 1 "$rounds"); do
	order=$variants
	[ $((r % 2)) = 0 ] && order=$(echo "$variants" | awk '{for (i = NF; i > 0; i--) printf "%s ", $i}')
	for v in $order; do
		stop
		install_variant "$v"
		start
		if want batch; then
			psql_ -At -f call.sql >"$D/call.out"
			md5=$(head -1 "$D/call.out")
			c=0
			grep '=' "$D/call.out" | while read -r line; do
				c=$((c + 1))
				for st in visibility search "result rows" total; do
					val=$(echo "$line" | sed -n "s/.*$st=\([0-9.]*\).*/\1/p")
					echo "$v,$r,batch $st,,$c,$val,us,$md5" >>"$csv"
				done
			done
			echo "$v round $r batch: $(grep -c "^$v,$r,batch total" "$csv") calls, rows md5 $md5"
		fi
		if want single; then
			# the store loaded and the pages cached before timing
			run "pgbench -h '$D' -p $port -n -M prepared -T 2 -c 1 -f single.sql postgres" >/dev/null 2>&1
			for c in $clients; do
				tps=$(run "PGOPTIONS='-c gpuivf.probes=$probes' pgbench -h '$D' -p $port -n -M prepared \
					-T $seconds -c $c -j $c -f single.sql postgres" 2>&1 |
					sed -n 's/^tps = \([0-9.]*\).*/\1/p')
				echo "$v,$r,single,$c,1,$tps,q/s," | tee -a "$csv"
			done
		fi
	done
done
backend=$(psql_ -Atc "\"SELECT backend FROM gpuindex_stats LIMIT 1\"")
py=${BENCH_PYTHON:-$root/bench/.cache/venv/bin/python}
[ -x "$py" ] || py=python3
"$py" "$here/report.py" "$csv" "$out/ab" \
	"gpuindex backend $backend, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'); $rows rows x $dim (heap $heap_mb MB, in shared buffers), $lists lists, probes $probes, gpuindex.host_threads $host_threads; batch: $nq queries a call, k $k, key column id, $reps calls a turn; single: pgbench -M prepared, ${seconds} s a client count; $rounds rounds, the libraries alternating"
cat "$out/ab.md"
