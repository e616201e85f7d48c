#!/bin/bash
# Several clients insert, delete and search one gpuivf index at once
# (pgbench custom scripts); then the index must agree with the table:
# no errors, an exhaustive index scan returns exactly the live rows, the
# store holds exactly the live rows after VACUUM, and concurrent searches
# were batched by the device service.  Then a window slides under
# concurrency, so that pages are unlinked and reused while rows are
# appended: the index still returns every live row, from the store and
# from the pages (a service restart reloads it).  Searches are left in
# flight past their rounds (gpuindex.service_overlap = on).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-concurrency-test}
port=$((${GPUINDEX_TEST_PORT_CONC:-54394} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

# mix NAME TABLE PAUSE_MS CLIENTS SCRIPT@WEIGHT...: pgbench runs the weighted
# scripts for 8 s while one more client runs VACUUM (INDEX_CLEANUP ON) TABLE
# every PAUSE_MS; exit 0 when neither had a failed transaction
mix() {
	local name=$1 table=$2 pause=$3 clients=$4 files="" f pid
	shift 4
	printf 'VACUUM (INDEX_CLEANUP ON) %s;\n\\sleep %s ms\n' "$table" "$pause" >"$dir/$name-vacuum.sql"
	chmod a+r "$dir/$name-vacuum.sql"
	for f in "$@"; do files+=" -f '$dir/$f'"; done
	as_pg "pgbench -n -h '$dir' -p $port -U postgres -c $clients -j $((clients / 2)) -T 8 \
		$files postgres" >"$dir/$name-pgbench.log" 2>&1 &
	pid=$!
	as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 1 -T 8 -f '$dir/$name-vacuum.sql' postgres" \
		>"$dir/$name-vacuum.log" 2>&1
	wait $pid
	grep -E "^number of transactions actually processed" "$dir/$name-pgbench.log" | sed 's/^/# /'
	grep -q "number of failed transactions: 0" "$dir/$name-pgbench.log" &&
		grep -q "number of failed transactions: 0" "$dir/$name-vacuum.log" && return 0
	tail -20 "$dir/$name-pgbench.log" "$dir/$name-vacuum.log"
	return 1
}

# every row an index scan with all lists probed and no LIMIT returns, as
# "rows|distinct ids"
exhaustive() {
	q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = $2;
	   SELECT count(*) || '|' || count(DISTINCT id) FROM (SELECT id FROM $1 ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 8))) s"
}

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.batch_linger_us = 500" \
	"gpuindex.service_overlap = on" || exit 1
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
chmod a+r "$dir"/*.sql

mix mixed t 500 8 insert.sql@3 delete.sql@2 search.sql@6 &&
	pass "mixed workload and concurrent VACUUM without errors" ||
	fail "mixed workload and concurrent VACUUM without errors"

live=$(q "SELECT count(*) FROM t")
echo "# live rows: $live"
# probes = lists and no LIMIT: the index scan must return every live row
check "exhaustive index scan returns every live row" "$live|$live" "$(exhaustive t 16)"
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
chmod a+r "$dir"/*.sql
mix window w 200 6 w_insert.sql@3 w_delete.sql@1 w_search.sql@2 &&
	pass "sliding window with concurrent VACUUM without errors" ||
	fail "sliding window with concurrent VACUUM without errors"
live=$(q "SELECT count(*) FROM w")
check "window: exhaustive index scan returns every live row" "$live|$live" "$(exhaustive w 4)"
# the rows as read back from the pages: a restart of the device service
# reloads the store from them
q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
sleep 1.5
check "window: the store reloaded from the pages holds every live row" "$live|$live" "$(exhaustive w 4)"
# VACUUM VERBOSE reports the index's deleted (unlinked) and reusable pages.
# Pages unlinked under the workload may all have been reused already when
# the inserts outran the deletes, so the oldest rows go now: one VACUUM
# flags their emptied pages idle, the next unlinks them (VERBOSE reports an
# index only when it had dead rows to remove).
oldest() {
	q "WITH d AS (DELETE FROM w WHERE id IN (SELECT id FROM w ORDER BY id LIMIT $1) RETURNING 1)
	   SELECT count(*) FROM d"
}
check "window: the oldest rows deleted" 3000 "$(oldest 3000)"
q "VACUUM (INDEX_CLEANUP ON) w" >/dev/null
# dead rows again, so that the next VACUUM reports the index
check "window: a few more of the oldest deleted" 100 "$(oldest 100)"
verbose=$(q "VACUUM (VERBOSE, INDEX_CLEANUP ON) w" | grep -o 'index "w_v_idx": pages: .*')
echo "# live rows $live; $verbose"
check "window: emptied pages were unlinked" 1 \
	"$(echo "$verbose" | sed -n 's/.* \([0-9]*\) currently deleted.*/\1/p' | awk '{print ($1 > 0)}')"

echo "gpuivf concurrency: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
