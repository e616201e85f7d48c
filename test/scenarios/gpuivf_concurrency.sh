#!/bin/bash
# Several clients insert, delete and search one gpuivf index at once
# (pgbench custom scripts); then the index must agree with the table:
# no errors, an exhaustive index scan returns exactly the live rows, the
# store holds exactly the live rows after VACUUM, and concurrent searches
# were batched by the device service.  Then a window slides under
# concurrency, so that pages are unlinked and reused while rows are
# appended: the index still returns every live row, from the store and
# from the pages (a service restart reloads it).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-/tmp/gpuindex-concurrency-test}
port=${GPUINDEX_TEST_PORT_CONC:-54394}
rm -rf "$dir"
trap 'cluster_stop "$dir"' EXIT
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.batch_linger_us = 500" || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
q "SELECT setseed(0.5);
   CREATE TABLE t (id bigserial PRIMARY KEY, v real[]);
   INSERT INTO t (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(1, 3000) i;
   CREATE INDEX t_v_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = 16);" >/dev/null

cat >"$dir/insert.sql" <<'SQL'
INSERT INTO t (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 8));
SQL
cat >"$dir/delete.sql" <<'SQL'
\set id random(1, 6000)
DELETE FROM t WHERE id = :id;
SQL
cat >"$dir/search.sql" <<'SQL'
SET enable_seqscan = off;
SET gpuivf.probes = 4;
SELECT id FROM t ORDER BY v <-> ARRAY(SELECT random()::real FROM generate_series(1, 8)) LIMIT 10;
SQL
cat >"$dir/vacuum.sql" <<'SQL'
VACUUM (INDEX_CLEANUP ON) t;
\sleep 500 ms
SQL
chmod a+r "$dir"/*.sql

as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 8 -j 4 -T 8 \
	-f '$dir/insert.sql@3' -f '$dir/delete.sql@2' -f '$dir/search.sql@6' postgres" >"$dir/pgbench.log" 2>&1 &
pid_bench=$!
as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 1 -T 8 -f '$dir/vacuum.sql' postgres" >"$dir/vacuum.log" 2>&1
wait $pid_bench
grep -q "number of failed transactions: 0" "$dir/pgbench.log" && pass "mixed workload without errors" ||
	{ fail "mixed workload without errors"; tail -20 "$dir/pgbench.log"; }
grep -q "number of failed transactions: 0" "$dir/vacuum.log" && pass "concurrent VACUUM without errors" ||
	{ fail "concurrent VACUUM without errors"; tail -5 "$dir/vacuum.log"; }
grep -E "^number of transactions actually processed" "$dir/pgbench.log" | sed 's/^/# /'

live=$(q "SELECT count(*) FROM t")
echo "# live rows: $live"
# probes = lists and no LIMIT: the index scan must return every live row
check "exhaustive index scan returns every live row" "$live|$live" \
	"$(q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = 16;
		 SELECT count(*) || '|' || count(DISTINCT id) FROM (SELECT id FROM t ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 8))) s")"
q "VACUUM (INDEX_CLEANUP ON) t" >/dev/null
check "store holds exactly the live rows after VACUUM" "$live" \
	"$(q "SELECT rows FROM gpuindex_stats WHERE index_name = 't_v_idx'")"
mean=$(q "SELECT round(mean_batch_size::numeric, 2) FROM gpuindex_stats WHERE index_name = 't_v_idx'")
echo "# mean search batch: $mean queries per backend call"
check "concurrent searches were batched (mean > 1)" 1 "$(python3 -c "print(int(float('$mean' or 0) > 1.0))")"

# A window sliding under concurrency: whole pages empty, are unlinked by
# one VACUUM and reused by appends of any list after a later one, while
# inserts append to the chains and searches run.
q "SELECT setseed(0.25);
   CREATE TABLE w (id bigserial PRIMARY KEY, v real[]);
   INSERT INTO w (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(1, 4000) i;
   CREATE INDEX w_v_idx ON w USING gpuivf (v real_l2_ops) WITH (lists = 4);" >/dev/null
cat >"$dir/w_insert.sql" <<'SQL'
INSERT INTO w (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
FROM generate_series(1, 20) i;
SQL
cat >"$dir/w_delete.sql" <<'SQL'
DELETE FROM w WHERE id < (SELECT min(id) FROM w) + 60;
SQL
cat >"$dir/w_search.sql" <<'SQL'
SET enable_seqscan = off;
SELECT id FROM w ORDER BY v <-> ARRAY(SELECT random()::real FROM generate_series(1, 8)) LIMIT 10;
SQL
cat >"$dir/w_vacuum.sql" <<'SQL'
VACUUM (INDEX_CLEANUP ON) w;
\sleep 200 ms
SQL
chmod a+r "$dir"/*.sql
as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 6 -j 3 -T 8 \
	-f '$dir/w_insert.sql@3' -f '$dir/w_delete.sql@1' -f '$dir/w_search.sql@2' postgres" >"$dir/w_pgbench.log" 2>&1 &
pid_bench=$!
as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 1 -T 8 -f '$dir/w_vacuum.sql' postgres" >"$dir/w_vacuum.log" 2>&1
wait $pid_bench
grep -q "number of failed transactions: 0" "$dir/w_pgbench.log" &&
	grep -q "number of failed transactions: 0" "$dir/w_vacuum.log" &&
	pass "sliding window with concurrent VACUUM without errors" ||
	{ fail "sliding window with concurrent VACUUM without errors"; tail -20 "$dir/w_pgbench.log" "$dir/w_vacuum.log"; }
live=$(q "SELECT count(*) FROM w")
check "window: exhaustive index scan returns every live row" "$live|$live" \
	"$(q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = 4;
		 SELECT count(*) || '|' || count(DISTINCT id) FROM (SELECT id FROM w ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 8))) s")"
# the rows as read back from the pages: a restart of the device service
# reloads the store from them
q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
sleep 1.5
check "window: the store reloaded from the pages holds every live row" "$live|$live" \
	"$(q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = 4;
		 SELECT count(*) || '|' || count(DISTINCT id) FROM (SELECT id FROM w ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 8))) s")"
# VACUUM VERBOSE reports the index's deleted (unlinked) and reusable pages
verbose=$(q "VACUUM (VERBOSE, INDEX_CLEANUP ON) w" | grep -o 'index "w_v_idx": pages: .*')
echo "# live rows $live; $verbose"
check "window: emptied pages were unlinked" 1 \
	"$(echo "$verbose" | sed -n 's/.* \([0-9]*\) currently deleted.*/\1/p' | awk '{print ($1 > 0)}')"

echo "gpuivf concurrency: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
