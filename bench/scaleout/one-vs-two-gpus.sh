#!/bin/bash
# One index on one GPU and spread over two (gpuindex.devices = 1 / 2), from SQL, on a GPU
# host with two GPUs and no PostgreSQL (not a test):
#
#   bash bench/scaleout/one-vs-two-gpus.sh OUTDIR
#
# Unpacks PostgreSQL from the carried .gpuhost/debs (tools/gpu-host/setup-postgres.sh),
# builds and installs gpuindex, makes 500,000 random 128-d rows (a gpuivf index of 700
# lists) and, alternating 1 and 2 devices twice: the restart's store load with a first
# search, the shards (service device / GPU ordinal : rows), the service's search stage of
# five batches of 10,000 queries (probes 32), and an INSERT of 100,000 rows (SCALE_DEVICES:
# the device counts in turn, default "1 2 1 2").  Writes
# OUTDIR/scale.txt.
cd "$(dirname "$0")/../.." || exit 1
OUT=${1:?usage: one-vs-two-gpus.sh OUTDIR}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
eval "$(bash tools/gpu-host/setup-postgres.sh .gpuhost/debs /tmp/pg)"; chmod -R a+rX /tmp/pg; rm -f /tmp/pg/usr/lib/postgresql/*/lib/llvmjit*.so
if [ ! -f /tmp/pg/usr/lib/postgresql/15/lib/gpuindex.so ]; then
  ( make -s -j32 with_llvm=no PG_CONFIG=$PG_CONFIG && make -s install with_llvm=no PG_CONFIG=$PG_CONFIG ) > $OUT/build.log 2>&1 || { echo build failed; exit 1; }
fi
D=/tmp/tc; rm -rf $D; mkdir -p $D; chown $PG_USER $D
su $PG_USER -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/initdb -D $D/data -A trust >/dev/null"
cat >> $D/data/postgresql.conf <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = cuda
gpuindex.devices = 1
shared_buffers = 8GB
maintenance_work_mem = 4GB
max_wal_size = 32GB
unix_socket_directories = '$D'
port = 55432
jit = off
CONF
pgs() { su $PG_USER -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/pg_ctl -D $D/data -l $D/log -w $1" >/dev/null; }
q() { su $PG_USER -c "LD_LIBRARY_PATH=$LD_LIBRARY_PATH $PG_BIN/psql -h $D -p 55432 -d postgres -Atq -c \"$1\""; }
now() { date +%s.%N; }
dt() { python3 -c "print(round($2 - $1, 3))"; }
pgs start
q "CREATE EXTENSION gpuindex"
q "SELECT setseed(0.5); CREATE TABLE t AS SELECT i AS id, ARRAY(SELECT (random() + (i % 97) * 0.05)::real FROM generate_series(1, 128) WHERE i > 0) AS v FROM generate_series(1, 500000) i"
q "CREATE TABLE qa AS SELECT array_agg(v ORDER BY id) AS a FROM (SELECT id, v FROM t WHERE id % 100 = 7 LIMIT 10000) s"
q "CREATE TABLE extra AS SELECT id + 2000000 AS id, v FROM t WHERE id <= 100000"
q "CREATE INDEX t_v ON t USING gpuivf (v real_l2_ops) WITH (lists = 700)"
for dev in ${SCALE_DEVICES:-1 2 1 2}; do
  su $PG_USER -c "sed -i '/^gpuindex.devices/d' $D/data/postgresql.conf; echo 'gpuindex.devices = $dev' >> $D/data/postgresql.conf"
  pgs restart
  t0=$(now); q "SET gpuivf.probes = 32; SELECT count(*) FROM gpuivf_search('t_v', (SELECT a[1:1] FROM qa), 10)" >/dev/null; t1=$(now)
  shards=$(q "SELECT string_agg(device || '/' || ordinal || ':' || rows, ' ') FROM gpuindex_store_shards()")
  s=""
  for r in 1 2 3 4 5; do
    s="$s $(q "SET gpuivf.probes = 32; SET gpuindex.trace_stages = off; SELECT count(*) FROM gpuivf_search('t_v', (SELECT a FROM qa), 10); SELECT round(us) FROM gpuindex_search_stages() WHERE stage = 'search'" | tail -1)"
  done
  t2=$(now); q "INSERT INTO t SELECT * FROM extra" ; t3=$(now)
  q "DELETE FROM t WHERE id > 2000000"; q "VACUUM (INDEX_CLEANUP ON) t"
  echo "devices $dev: load+first search $(dt $t0 $t1) s; shards $shards; batch 10000 search stage us:$s; INSERT 100K rows $(dt $t2 $t3) s"
done | tee $OUT/scale.txt
pgs stop
