#!/bin/bash
# The batch API's row checks (heap fetch, visibility, key column) of one gpuindex.so
# against another's, on one cluster (not a test: nothing here runs in CI):
#
#   BF_OLD=TREE bash bench/batchfetch/run.sh OUTDIR
#
# One table of BF_ROWS random BF_DIM-d rows (id bigint), a gpuivf index with BF_LISTS
# lists; a call of gpuivf_search with BF_NQ random queries, k 10, probes BF_PROBES,
# key column id, rows counted on the server.  In BF_ROUNDS rounds the two libraries take
# turns (old first in odd rounds; the server restarted between them), each timing BF_REPS
# calls after two warm-up calls, with the heap in shared buffers; with BF_COLD=1 each call
# is instead preceded by a restart with the heap evicted (pg_buffercache's eviction is not
# in 15: the table is read from the OS cache, dropped with drop_caches when root).
# Every call's stages come from gpuindex_search_stages().  Writes OUTDIR/batchfetch.csv
# (every call), batchfetch.md (medians, ratios) and batchfetch.png.
#
# Environment [default]: BF_ROWS [1000000] BF_DIM [32] BF_LISTS [2000] BF_PROBES [1]
#   BF_NQ [1000] BF_ROUNDS [4] BF_REPS [7] BF_OLD [none: the current library alone]
#   BF_DEVICE [auto] BF_HOST_THREADS [1: on the host backend the service searches the next
#   part on one core while the session checks rows on another, as beside a GPU] BF_PORT [55450] BF_DIR [/tmp/gpuindex-bench-batchfetch]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
[ $# -ge 1 ] || { echo "usage: bash bench/batchfetch/run.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
rows=${BF_ROWS:-1000000}
dim=${BF_DIM:-32}
lists=${BF_LISTS:-2000}
probes=${BF_PROBES:-1}
nq=${BF_NQ:-1000}
rounds=${BF_ROUNDS:-4}
reps=${BF_REPS:-7}
port=${BF_PORT:-55450}
device=${BF_DEVICE:-auto}
host_threads=${BF_HOST_THREADS:-1}
D=${BF_DIR:-/tmp/gpuindex-bench-batchfetch}
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
: "${PG_BIN:=$($PG_CONFIG --bindir)}"
: "${PG_USER:=postgres}"
lib=$($PG_CONFIG --pkglibdir)

rm -rf "$D" && mkdir -p "$D"
variants=new
cp "$lib/gpuindex.so" "$D/new.so"
if [ -n "${BF_OLD:-}" ]; then
	make -s -C "$BF_OLD" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" GPUINDEX_CUDA=0 \
		>"$out/build-old.log" 2>&1
	cp "$BF_OLD/gpuindex.so" "$D/old.so"
	variants="old new"
fi
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"

run() {
	if [ "$(id -u)" = 0 ]; then
		su "$PG_USER" -s /bin/bash -c "export PATH='$PG_BIN':\$PATH; cd '$D'; $*"
	else
		bash -c "export PATH='$PG_BIN':\$PATH; cd '$D'; $*"
	fi
}
stop() { run "pg_ctl -D '$D/data' -w stop >/dev/null 2>&1" || true; }
start() { run "pg_ctl -D '$D/data' -l '$D/server.log' -w start >/dev/null"; }
psql_() { run "psql -X -q -h '$D' -p $port -v ON_ERROR_STOP=1 $* postgres"; }

run "initdb -D '$D/data' >/dev/null 2>&1"
cat >>"$D/data/postgresql.conf" <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = $device
port = $port
unix_socket_directories = '$D'
shared_buffers = 1GB
fsync = off
gpuindex.host_threads = $host_threads
CONF
cat >"$D/setup.sql" <<SQL
CREATE EXTENSION gpuindex;
SELECT setseed(0.7);
CREATE TABLE t (id bigint, v real[]) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, $dim) WHERE i > 0)
  FROM generate_series(1, $rows) i;
SET maintenance_work_mem = '1GB';
CREATE INDEX t_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = $lists);
VACUUM ANALYZE t;
CREATE TABLE q AS SELECT ARRAY(SELECT random()::real FROM generate_series(1, $dim) WHERE j > 0) AS v
  FROM generate_series(1, $nq) j;
CREATE TABLE qp AS SELECT array_agg(v) AS b FROM q;
SQL
cat >"$D/call.sql" <<SQL
SET gpuivf.probes = $probes;
SELECT count(*) FROM gpuivf_search('t_idx', (SELECT b FROM qp), 10, 'id', NULL::bigint);
SELECT count(*) FROM gpuivf_search('t_idx', (SELECT b FROM qp), 10, 'id', NULL::bigint);
\\o /dev/null
SQL
for i in $(seq 1 "$reps"); do
	cat >>"$D/call.sql" <<SQL
SELECT count(*) FROM gpuivf_search('t_idx', (SELECT b FROM qp), 10, 'id', NULL::bigint);
\\o
SELECT string_agg(stage || '=' || us, ' ' ORDER BY stage) FROM gpuindex_search_stages()
 WHERE stage IN ('visibility', 'total', 'search', 'result rows');
\\o /dev/null
SQL
done
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"/*.sql
cp "$D/new.so" "$lib/gpuindex.so"
start
trap 'stop; cp "$D/new.so" "$lib/gpuindex.so"' EXIT
psql_ -f setup.sql >"$out/setup.log" 2>&1
heap_mb=$(psql_ -Atc "\"SELECT pg_relation_size('t') / 1048576\"")

csv=$out/batchfetch.csv
echo "variant,round,call,visibility_us,search_us,rows_us,total_us" >"$csv"
for r in $(seq 1 "$rounds"); do
	order=$variants
	[ $((r % 2)) = 0 ] && order=$(echo "$variants" | awk '{for (i = NF; i > 0; i--) printf "%s ", $i}')
	for v in $order; do
		stop
		cp "$D/$v.so" "$lib/gpuindex.so"
		start
		c=0
		psql_ -At -f call.sql | grep '=' | while read -r line; do
			c=$((c + 1))
			vis=$(echo "$line" | sed -n 's/.*visibility=\([0-9.]*\).*/\1/p')
			se=$(echo "$line" | sed -n 's/.*search=\([0-9.]*\).*/\1/p')
			rw=$(echo "$line" | sed -n 's/.*result rows=\([0-9.]*\).*/\1/p')
			to=$(echo "$line" | sed -n 's/.*total=\([0-9.]*\).*/\1/p')
			echo "$v,$r,$c,$vis,$se,$rw,$to" | tee -a "$csv"
		done
	done
done
backend=$(psql_ -Atc "\"SELECT backend FROM gpuindex_stats LIMIT 1\"")
python3 "$here/report.py" "$csv" "$out/batchfetch" \
	"gpuindex backend $backend, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'); $rows rows x $dim (heap $heap_mb MB, in shared buffers), $lists lists, probes $probes, host_threads $host_threads, $nq queries a call, k 10, key column id; $rounds rounds of $reps calls per library, libraries alternating"
cat "$out/batchfetch.md"
