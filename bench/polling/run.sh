#!/bin/bash
# One-client and 8-client search q/s (pgbench, 200K x 128 random rows, 450 lists, probes 16) with
# the default polling (gpuindex.service_spin_us 50, client_spin_us 100) and with longer
# polling (300, 400), alternating in 4 rounds on one cluster; report.py makes the table and
# plot from spin.csv.  For a GPU host:
#   bash bench/polling/run.sh OUTDIR   (carry .gpuhost/debs; writes OUTDIR/spin.csv)
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:?usage: run.sh OUTDIR}" && cd "$1" && pwd)
source <(bash tools/gpu-host/setup-postgres.sh .gpuhost/debs /tmp/pg-spin)
rm -f "$($PG_CONFIG --pkglibdir)"/llvmjit*.so
t0=$SECONDS
{ make -s -j16 PG_CONFIG=$PG_CONFIG with_llvm=no && make -s PG_CONFIG=$PG_CONFIG with_llvm=no install; } > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
echo "build $((SECONDS - t0)) s"
chmod -R a+rX /tmp/pg-spin
D=/tmp/spin; rm -rf $D; mkdir -p $D; chown $PG_USER $D
run() { su $PG_USER -s /bin/bash -c "export PATH=$PG_BIN:\$PATH LD_LIBRARY_PATH=$LD_LIBRARY_PATH; cd $D; $*"; }
run "initdb -D $D/data >/dev/null 2>&1"
cat >> $D/data/postgresql.conf <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = cuda
port = 55441
unix_socket_directories = '$D'
shared_buffers = 2GB
max_connections = 100
CONF
cat > $D/setup.sql <<'SQL'
CREATE EXTENSION gpuindex;
SELECT setseed(0.3);
CREATE TABLE t AS SELECT i AS id, ARRAY(SELECT random()::real FROM generate_series(1,128) WHERE i>0) AS v FROM generate_series(1,200000) i;
CREATE UNIQUE INDEX ON t (id);
CREATE INDEX ON t USING gpuivf (v real_l2_ops) WITH (lists = 450);
VACUUM ANALYZE t;
ALTER DATABASE postgres SET gpuivf.probes = 16;
SQL
printf '\\set id random(1, 200000)\nSELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = :id) LIMIT 10;\n' > $D/q.sql
chown $PG_USER $D/q.sql
run "pg_ctl -D $D/data -l $D/log -w start >/dev/null"
t0=$SECONDS; run "psql -h $D -p 55441 -q -f setup.sql postgres" > $OUT/setup.log 2>&1; echo "setup $((SECONDS - t0)) s"
run "psql -h $D -p 55441 -Atc 'SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> (SELECT v FROM t WHERE id = 1) LIMIT 10) s' postgres"
pb() { run "PGOPTIONS='-c gpuindex.client_spin_us=$2' pgbench -h $D -p 55441 -n -M prepared -c $3 -j $3 -T 5 -f q.sql postgres" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
{ echo "round,service_spin_us,client_spin_us,clients,qps"
for r in 1 2 3 4; do
	for cfg in "50 100" "300 400"; do
		set -- $cfg
		run "psql -h $D -p 55441 -Atc \"ALTER SYSTEM SET gpuindex.service_spin_us = $1\" -c 'SELECT pg_reload_conf()' postgres" >/dev/null
		sleep 1
		for c in 1 8; do echo "$r,$1,$2,$c,$(pb x $2 $c)"; done
	done
done; } | tee $OUT/spin.csv
