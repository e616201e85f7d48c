#!/bin/bash
# Single-row INSERT latency from pgbench (not a test: nothing here runs in CI):
#
#   bash bench/insert/run.sh OUTDIR
#
# One cluster, three tables of INS_ROWS x 128 random rows: one with no index, one with a
# gpuivf index, one with pgvector's IVFFlat (INS_LISTS lists each); pgbench (-M prepared,
# one client) inserts INS_N single rows (autocommit, each read from a source table by id)
# into each, in INS_ROUNDS rounds.  With INS_OLD=TREE (a source tree of an earlier gpuindex,
# e.g. a `git archive` extraction) its gpuindex.so is built too and the two libraries take
# turns each round (the server restarted between them; gpuindex_cuda.so is the current
# tree's), so the old and the new code are measured side by side.  Writes OUTDIR/
# insert-latency.csv (every run), insert-latency.md (medians, ratios) and .png.
#
# Environment [default]: INS_DEVICE [auto: cuda where a GPU is, else cpu],
#   INS_ROWS [100000], INS_LISTS [1000], INS_N [5000], INS_ROUNDS [5], INS_OLD [none],
#   INS_PORT [55440], INS_DIR [/tmp/gpuindex-bench-insert], BENCH_PG_DEBS: on a machine
#   without PostgreSQL, unpack these Debian packages first (tools/gpu-host/setup-postgres.sh;
#   pgvector is then built from bench/.cache/src-trixie).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
[ $# -ge 1 ] || { echo "usage: bash bench/insert/run.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
rows=${INS_ROWS:-100000}
lists=${INS_LISTS:-1000}
n=${INS_N:-5000}
rounds=${INS_ROUNDS:-5}
port=${INS_PORT:-55440}
D=${INS_DIR:-/tmp/gpuindex-bench-insert}

if [ -n "${BENCH_PG_DEBS:-}" ]; then
	# shellcheck disable=SC1090
	source <(bash "$root/tools/gpu-host/setup-postgres.sh" "$BENCH_PG_DEBS" /tmp/pg-bench-insert)
	rm -f "$($PG_CONFIG --pkglibdir)"/llvmjit*.so
	make -s -C "$root" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no >"$out/build.log" 2>&1
	make -s -C "$root" PG_CONFIG="$PG_CONFIG" with_llvm=no install >>"$out/build.log" 2>&1
	BENCH_PGXS_ARGS=with_llvm=no bash "$root/bench/setup/pgvector.sh" >>"$out/build.log" 2>&1
	chmod -R a+rX /tmp/pg-bench-insert
fi
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
: "${PG_BIN:=$($PG_CONFIG --bindir)}"
: "${PG_USER:=postgres}"
lib=$($PG_CONFIG --pkglibdir)
device=${INS_DEVICE:-auto}

variants=new
cp "$lib/gpuindex.so" "$D.new.so"
if [ -n "${INS_OLD:-}" ]; then
	make -s -C "$INS_OLD" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no GPUINDEX_CUDA=0 \
		>"$out/build-old.log" 2>&1
	cp "$INS_OLD/gpuindex.so" "$D.old.so"
	variants="old new"
fi

run() {
	if [ "$(id -u)" = 0 ]; then
		su "$PG_USER" -s /bin/bash -c "export PATH='$PG_BIN':\$PATH LD_LIBRARY_PATH='${LD_LIBRARY_PATH:-}'; cd '$D'; $*"
	else
		bash -c "export PATH='$PG_BIN':\$PATH; cd '$D'; $*"
	fi
}
stop() { run "pg_ctl -D '$D/data' -w stop >/dev/null 2>&1" || true; }
rm -rf "$D" && mkdir -p "$D"
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"
run "initdb -D '$D/data' >/dev/null 2>&1"
cat >>"$D/data/postgresql.conf" <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = $device
port = $port
unix_socket_directories = '$D'
shared_buffers = 1GB
fsync = off
CONF
cat >"$D/setup.sql" <<SQL
CREATE EXTENSION gpuindex; CREATE EXTENSION vector;
SELECT setseed(0.3);
CREATE TABLE src AS SELECT i AS id, ARRAY(SELECT random()::real FROM generate_series(1, 128) WHERE i > 0) AS v
  FROM generate_series(1, $rows + $rows / 10) i;
CREATE UNIQUE INDEX ON src (id);
CREATE TABLE t_gpuivf (id int, v real[]); INSERT INTO t_gpuivf SELECT * FROM src WHERE id <= $rows;
CREATE TABLE t_ivfflat (id int, v vector(128)); INSERT INTO t_ivfflat SELECT id, v::vector FROM src WHERE id <= $rows;
CREATE TABLE t_none (id int, v real[]);
SET maintenance_work_mem = '1GB';
CREATE INDEX ON t_gpuivf USING gpuivf (v real_l2_ops) WITH (lists = $lists);
CREATE INDEX ON t_ivfflat USING ivfflat (v vector_l2_ops) WITH (lists = $lists);
VACUUM ANALYZE;
SQL
for e in none gpuivf ivfflat; do
	cast=; [ $e = ivfflat ] && cast=::vector
	printf '\\set id random(%d, %d)\nINSERT INTO t_%s SELECT id, v%s FROM src WHERE id = :id;\n' \
		$((rows + 1)) $((rows + rows / 10)) $e "$cast" >"$D/$e.sql"
done
[ "$(id -u)" = 0 ] && chown "$PG_USER" "$D"/*.sql
run "pg_ctl -D '$D/data' -l '$D/server.log' -w start >/dev/null"
trap stop EXIT
run "psql -X -q -h '$D' -p $port -v ON_ERROR_STOP=1 -f setup.sql postgres" >"$out/setup.log" 2>&1

csv=$out/insert-latency.csv
echo "variant,engine,round,inserts,latency_ms" >"$csv"
for r in $(seq 1 "$rounds"); do
	for v in $variants; do
		stop
		cp "$D.$v.so" "$lib/gpuindex.so"
		run "pg_ctl -D '$D/data' -l '$D/server.log' -w start >/dev/null"
		# the store loaded before timing
		run "psql -X -h '$D' -p $port -Atc 'SELECT count(*) FROM (SELECT id FROM t_gpuivf ORDER BY v <-> (SELECT v FROM src WHERE id = 1) LIMIT 1) s' postgres" >/dev/null
		for e in none gpuivf ivfflat; do
			ms=$(run "pgbench -h '$D' -p $port -n -M prepared -t $n -f $e.sql postgres" 2>&1 |
				sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
			echo "$v,$e,$r,$n,$ms" | tee -a "$csv"
		done
	done
done
backend=$(run "psql -X -h '$D' -p $port -Atc 'SELECT backend FROM gpuindex_stats LIMIT 1' postgres")
cp "$D.new.so" "$lib/gpuindex.so"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
python3 "$here/report.py" "$csv" "$out/insert-latency" \
	"gpuindex backend $backend${gpu:+ ($gpu)}, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'); $rows rows x 128, lists $lists, $n single-row INSERTs per run (pgbench -M prepared, 1 client), $rounds rounds"
cat "$out/insert-latency.md"
