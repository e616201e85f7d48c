#!/bin/bash
# CREATE INDEX time of a pq gpuivf index from SQL on a GPU host, for one or more builds of
# gpuindex.so side by side on one cluster (the CUDA module is the checkout's):
#
#   bash bench/store/pq-build-time.sh OUTDIR [A.so B.so ...]     # default: the checkout's
#
# PostgreSQL comes from the carried Debian packages (.gpuhost/debs); the table holds
# seeded random 128-d rows, the index 700 lists with the pq defaults; each build runs
# twice, in turn, with client_min_messages = debug1 so that its phase times are printed,
# and the index pages' md5 (page headers left out) shows whether the builds agree.
# BENCH_ROWS (450000) sets the table's size, GPUINDEX_BENCH_DEVICE (cuda) the service's device.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: pq-build-time.sh OUTDIR [A.so B.so ...]}
shift
mkdir -p "$out"
eval "$(bash tools/gpu-host/setup-postgres.sh .gpuhost/debs /tmp/pg)"
chmod -R a+rX /tmp/pg
rm -f /tmp/pg/usr/lib/postgresql/*/lib/llvmjit*.so
(make -s -j32 with_llvm=no PG_CONFIG="$PG_CONFIG" && make -s install with_llvm=no PG_CONFIG="$PG_CONFIG") \
	>"$out/build.log" 2>&1 || { echo "build failed"; tail "$out/build.log"; exit 1; }
lib=$("$PG_CONFIG" --pkglibdir)
cp "$lib/gpuindex.so" /tmp/pq-build-checkout.so
mods=("$@")
[ ${#mods[@]} -gt 0 ] || mods=(/tmp/pq-build-checkout.so)
D=/tmp/pq-build-time
rm -rf $D && mkdir -p $D && chown "$PG_USER" $D
su "$PG_USER" -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/initdb -D $D/data -A trust >/dev/null"
cat >>$D/data/postgresql.conf <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = ${GPUINDEX_BENCH_DEVICE:-cuda}
shared_buffers = 8GB
maintenance_work_mem = 4GB
max_wal_size = 32GB
unix_socket_directories = '$D'
port = 55433
jit = off
CONF
pgs() { su "$PG_USER" -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/pg_ctl -D $D/data -l $D/log -w $1" >/dev/null; }
q() { su "$PG_USER" -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/psql -h $D -p 55433 -d postgres -Atq -c \"$1\"" 2>&1; }
pgs start
q "CREATE EXTENSION gpuindex"
q "CREATE EXTENSION pageinspect"
q "SELECT setseed(0.5); CREATE TABLE t AS SELECT i AS id, ARRAY(SELECT (random() + (i % 97) * 0.05)::real FROM generate_series(1, 128) WHERE i > 0) AS v FROM generate_series(1, ${BENCH_ROWS:-450000}) i"
for r in 1 2; do
	for so in "${mods[@]}"; do
		cp --remove-destination "$so" "$lib/gpuindex.so"
		pgs restart
		echo "== $(basename "$so") round $r: $(q "SET client_min_messages = debug1; CREATE INDEX t_pq ON t USING gpuivf (v) WITH (lists = 700, quantizer = 'pq')" | grep -o 'k-means.*')"
		echo "   index md5 $(q "CHECKPOINT; SELECT md5(string_agg(md5(substring(get_raw_page('t_pq', b) from 25)::text), '' ORDER BY b)) FROM generate_series(0, pg_relation_size('t_pq') / 8192 - 1) b" | tail -1)"
		q "DROP INDEX t_pq"
	done
done | tee "$out/pq-build-time.txt"
pgs stop
cp --remove-destination /tmp/pq-build-checkout.so "$lib/gpuindex.so"
