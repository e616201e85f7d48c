#!/bin/bash
# gpuivf across restarts, crashes and DDL: after a clean restart, a crash
# (kill -9 of a backend: the postmaster resets everything) and a restart of
# the device service alone, the index reloads from its pages on first use
# and answers exactly as before; REINDEX, TRUNCATE, DROP INDEX and DROP
# TABLE and DROP DATABASE leave no stale store in gpuindex_stats.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-restart-test}
port=$((${GPUINDEX_TEST_PORT_RESTART:-54393} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

wait_ready() {
	for i in $(seq 1 120); do
		[ "$(q "SELECT 1" 2>/dev/null)" = 1 ] && return 0
		sleep 0.5
	done
	return 1
}

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1

q "CREATE EXTENSION gpuindex" >/dev/null
q "SELECT setseed(0.17);
   CREATE TABLE t (id int PRIMARY KEY, v real[]);
   INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(1, 5000) i;
   CREATE TABLE qs AS SELECT q, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE q > 0) AS v
   FROM generate_series(1, 20) q;
   CREATE INDEX t_v_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = 25);" >/dev/null
# rows inserted after the build live only in the pages and the insert path
q "INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(5001, 5500) i; DELETE FROM t WHERE id % 7 = 0;" >/dev/null

answers() {
	q "SET gpuivf.probes = 5; SET enable_seqscan = off;
	   SELECT string_agg(ids, ' ' ORDER BY q) FROM (
		 SELECT q, (SELECT string_agg(id::text || ':' || round((v <-> qs.v)::numeric, 4), ',')
					FROM (SELECT id, v FROM t ORDER BY v <-> qs.v LIMIT 10) s) AS ids FROM qs) x"
}
uses_index=$(q "SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 10" | grep -c t_v_idx)
check "plan uses the gpuivf index" 1 "$uses_index"
a0=$(answers)
[ -n "$a0" ] && [ "${a0#ERROR}" = "$a0" ] && pass "answers before restart" || fail "answers before restart ($a0)"

as_pg "pg_ctl -D '$dir/data' -m fast -w restart -l '$dir/server.log' >/dev/null"
wait_ready
check "store gone after a clean restart" 0 "$(q "SELECT count(*) FROM gpuindex_stats")"
check "same answers after a clean restart" "$a0" "$(answers)"
# deleted rows stay in the pages until VACUUM: the store holds all 5500
check "store reloaded once from the pages" "1|5500" "$(q "SELECT loads || '|' || rows FROM gpuindex_stats")"

# crash: kill -9 a backend; the postmaster resets shared memory and all
(cluster_psql "$dir" $port -Atc "SELECT pg_sleep(60)" >/dev/null 2>&1 &)
sleep 1
victim=$(q "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
kill -9 $victim
sleep 1
wait_ready
check "same answers after a crash" "$a0" "$(answers)"
grep -q "terminated by signal 9" "$dir/server.log" && pass "the crash happened" || fail "the crash happened"

# the service alone restarts: stores are gone, the next scan reloads
q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
check "same answers after a service restart" "$a0" "$(answers)"

# rows written while the index was not loaded reach it through the pages
q "INSERT INTO t VALUES (99999, ARRAY(SELECT 0.5::real FROM generate_series(1, 16)))" >/dev/null
q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
sleep 1.5
check "row inserted before a service restart is found" 99999 \
	"$(q "SET enable_seqscan = off; SET gpuivf.probes = 25; SELECT id FROM t ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 16)) LIMIT 1")"

# DDL leaves no stale store
old=$(q "SELECT relfilenode FROM gpuindex_stats WHERE index_name = 't_v_idx'")
q "REINDEX INDEX t_v_idx" >/dev/null
q "SET enable_seqscan = off; SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 1" >/dev/null
check "REINDEX: one store, of the new relfilenode" "1|false" \
	"$(q "SELECT count(*) || '|' || bool_or(relfilenode = $old) FROM gpuindex_stats WHERE indexrelid = 't_v_idx'::regclass")"
old=$(q "SELECT relfilenode FROM gpuindex_stats WHERE index_name = 't_v_idx'")
q "TRUNCATE t" >/dev/null
check "TRUNCATE: the old store is gone" 0 "$(q "SELECT count(*) FROM gpuindex_stats WHERE relfilenode = $old")"
q "INSERT INTO t SELECT i, ARRAY(SELECT (random() * 10)::real FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(1, 100) i" >/dev/null
q "SET enable_seqscan = off; SELECT id FROM t ORDER BY v <-> (SELECT v FROM qs WHERE q = 1) LIMIT 1" >/dev/null
check "TRUNCATE then INSERT: one store with the new rows" "1|100" \
	"$(q "SELECT count(*) || '|' || sum(rows) FROM gpuindex_stats WHERE indexrelid = 't_v_idx'::regclass")"
q "DROP INDEX t_v_idx" >/dev/null
check "DROP INDEX: no store" 0 "$(q "SELECT count(*) FROM gpuindex_stats")"
q "CREATE INDEX t_v_idx2 ON t USING gpuivf (v real_l2_ops) WITH (lists = 4)" >/dev/null
check "new index: one store, resident at once" "1|100" "$(q "SELECT count(*) || '|' || sum(rows) FROM gpuindex_stats")"
q "DROP TABLE t" >/dev/null
check "DROP TABLE: no store" 0 "$(q "SELECT count(*) FROM gpuindex_stats")"

# DROP DATABASE drops its stores (a database created later with the same
# OID must never be served them)
q "CREATE DATABASE other" >/dev/null
cluster_psql "$dir" $port -d other -Atc "CREATE EXTENSION gpuindex;
   CREATE TABLE o (id int, v real[]);
   INSERT INTO o SELECT i, ARRAY[i, i + 1]::real[] FROM generate_series(1, 300) i;
   CREATE INDEX o_v ON o USING gpuivf (v) WITH (lists = 3);
   CREATE INDEX o_v2 ON o USING gpuivf (v) WITH (lists = 2);" >/dev/null 2>&1
other_db=$(q "SELECT oid FROM pg_database WHERE datname = 'other'")
check "another database's indexes have stores" 2 \
	"$(q "SELECT count(*) FROM gpuindex_stats WHERE dbid = $other_db")"
q "DROP DATABASE other" >/dev/null
check "DROP DATABASE: its stores are gone" 0 \
	"$(q "SELECT count(*) FROM gpuindex_stats WHERE dbid = $other_db")"

# a CREATE INDEX rolled back in sessions that end right after: no store left
q "CREATE TABLE rb (id int, v real[]);
   INSERT INTO rb SELECT i, ARRAY[i, -i]::real[] FROM generate_series(1, 500) i" >/dev/null
for i in 1 2 3; do
	q "BEGIN; CREATE INDEX rb_v ON rb USING gpuivf (v) WITH (lists = 4); ROLLBACK" >/dev/null
done
left=""
for i in $(seq 1 50); do
	left=$(q "SELECT count(*) FROM gpuindex_stats")
	[ "$left" = 0 ] && break
	sleep 0.1
done
check "rolled-back builds in ended sessions leave no store" 0 "$left"
check "a rolled-back build's store is gone at the session's next search" 0 \
	"$(q "BEGIN; CREATE INDEX rb_v ON rb USING gpuivf (v) WITH (lists = 4); ROLLBACK;
	     CREATE INDEX rb_w ON rb USING gpuivf (v) WITH (lists = 2);
	     SET enable_seqscan = off; SELECT count(*) FROM (SELECT id FROM rb ORDER BY v <-> '{1,1}' LIMIT 1) s;
	     SELECT count(*) FROM gpuindex_stats WHERE indexrelid <> 'rb_w'::regclass" | tail -1)"
q "DROP TABLE rb" >/dev/null

echo "gpuivf restart: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
