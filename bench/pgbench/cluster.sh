# Sourced by the pgbench A/B scripts (bench/polling, bench/limit-hint): one
# PostgreSQL cluster with gpuindex built and installed from this tree, and the
# 200K x 128 random table the A/Bs search.  On a GPU host PostgreSQL comes from
# the carried Debian packages (.gpuhost/debs); BENCH_LOCAL_PG=1 uses the
# machine's own (its pg_config, the postgres user, gpuindex.device = cpu).
#   pgb_cluster NAME PORT   build, install, initdb, start: $D, run(), sql()
#   pgb_table ROWS LISTS PROBES   the table t(id, v real[128]) and its gpuivf index
#   pgb_tps CLIENTS FILE [PGOPTIONS]   pgbench -T ${PGB_SECONDS:-5}, prepared: tps
pgb_cluster() {
	local name=$1 port=$2 t0
	if [ -n "${BENCH_LOCAL_PG:-}" ]; then
		PG_CONFIG=${PG_CONFIG:-pg_config} PG_USER=${PG_USER:-postgres}
		PG_BIN=$($PG_CONFIG --bindir) PGB_DEVICE=${PGB_DEVICE:-cpu}
		make_args="GPUINDEX_CUDA=0"
	else
		source <(bash tools/gpu-host/setup-postgres.sh .gpuhost/debs /tmp/pg-$name)
		rm -f "$($PG_CONFIG --pkglibdir)"/llvmjit*.so
		chmod -R a+rX /tmp/pg-$name
		PGB_DEVICE=${PGB_DEVICE:-cuda} make_args="with_llvm=no"
	fi
	t0=$SECONDS
	if [ -z "${BENCH_SKIP_INSTALL:-}" ]; then
		{ make -s -j"$(nproc)" PG_CONFIG=$PG_CONFIG $make_args &&
			make -s PG_CONFIG=$PG_CONFIG $make_args install; } >$OUT/build.log 2>&1 ||
			{ tail -20 $OUT/build.log; exit 1; }
	fi
	echo "build $((SECONDS - t0)) s"
	D=/tmp/pgb-$name PGB_PORT=$port
	rm -rf $D && mkdir -p $D && chown $PG_USER $D
	run "initdb -D $D/data >/dev/null 2>&1"
	cat >>$D/data/postgresql.conf <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = $PGB_DEVICE
port = $port
unix_socket_directories = '$D'
shared_buffers = 2GB
max_connections = 100
jit = off
CONF
	run "pg_ctl -D $D/data -l $D/log -w start >/dev/null"
}
run() { su $PG_USER -s /bin/bash -c "export PATH=$PG_BIN:\$PATH LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}; cd $D; $*"; }
sql() { run "psql -h $D -p $PGB_PORT -X -q -At postgres" ; }
pgb_table() {
	local t0=$SECONDS
	sql >$OUT/setup.log 2>&1 <<SQL
CREATE EXTENSION gpuindex;
SELECT setseed(0.3);
CREATE TABLE t AS SELECT i AS id, ARRAY(SELECT random()::real FROM generate_series(1,128) WHERE i>0) AS v FROM generate_series(1,$1) i;
CREATE UNIQUE INDEX ON t (id);
CREATE INDEX ON t USING gpuivf (v real_l2_ops) WITH (lists = $2);
VACUUM ANALYZE t;
ALTER DATABASE postgres SET gpuivf.probes = $3;
SQL
	echo "setup $((SECONDS - t0)) s"
}
pgb_tps() {
	run "PGOPTIONS='${3:-}' pgbench -h $D -p $PGB_PORT -n -M prepared -c $1 -j $1 -T ${PGB_SECONDS:-5} -f $2 postgres" 2>&1 |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
