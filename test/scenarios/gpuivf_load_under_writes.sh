#!/bin/bash
# Loads of a store from its pages while other sessions write.  In each round
# clients insert, delete, VACUUM and search one gpuivf index while its store
# is dropped (the device service is restarted, or a DROP INDEX is rolled
# back) and reloaded by the next search; once the writers stop, the store
# that load left must equal the pages: an exhaustive index search (probes =
# lists, every row) and the batch API return exactly the rows a sequential
# scan returns, no row twice and none lost, and the store holds as many
# records as the list pages.  The same after one more forced reload of each
# kind with nobody writing.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-load-writes-test}
port=$((${GPUINDEX_TEST_PORT_LOAD:-54398} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.batch_linger_us = 200" || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
# 64 dimensions: a load of these rows takes several LOAD_CHUNKs
q "SELECT setseed(0.7);
   CREATE TABLE t (id bigserial PRIMARY KEY, v real[]);
   INSERT INTO t (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
   FROM generate_series(1, 30000) i;
   CREATE INDEX t_v_idx ON t USING gpuivf (v real_l2_ops) WITH (lists = 16);" >/dev/null

qvec="ARRAY(SELECT 0.5::real FROM generate_series(1, 64))"
cat >"$dir/insert.sql" <<'SQL'
INSERT INTO t (v) SELECT ARRAY(SELECT random()::real FROM generate_series(1, 64) WHERE i > 0)
FROM generate_series(1, 5) i;
SQL
# old rows go, as in a sliding window: whole pages empty, and VACUUM
# retires them while loads walk the chains; deletes outpace inserts but keep
# the newest 20,000 ids, so the table stays under the batch API's k on any
# machine
cat >"$dir/delete.sql" <<'SQL'
\set r random(0, 3000)
DELETE FROM t WHERE id IN (SELECT id FROM t WHERE id >= (SELECT min(id) FROM t) + :r
                             AND id < (SELECT max(id) FROM t) - 20000
                           ORDER BY id LIMIT 10);
SQL
cat >"$dir/search.sql" <<'SQL'
SET enable_seqscan = off;
SET gpuivf.probes = 2;
SELECT id FROM t ORDER BY v <-> ARRAY(SELECT random()::real FROM generate_series(1, 64)) LIMIT 5;
SQL
printf 'VACUUM (INDEX_CLEANUP ON) t;\n\\sleep 700 ms\n' >"$dir/vacuum.sql"
chmod a+r "$dir"/*.sql

# "rows|md5 of the sorted ctids": what a sequential scan sees, what an
# exhaustive index scan and the batch API return
heap_rows() {
	q "SET enable_indexscan = off; SET enable_bitmapscan = off;
	   SELECT count(*) || '|' || md5(string_agg(ctid::text, ',' ORDER BY ctid)) FROM t"
}
index_rows() {
	q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = 16;
	   SELECT count(*) || '|' || md5(string_agg(ctid::text, ',' ORDER BY ctid))
	   FROM (SELECT ctid FROM t ORDER BY v <-> $qvec) s"
}
batch_rows() {
	q "SET gpuivf.probes = 16;
	   SELECT count(*) || '|' || md5(string_agg(ctid::text, ',' ORDER BY ctid))
	   FROM gpuivf_search('t_v_idx', $qvec, 100000)"
}
# "records|distinct rows" on the list pages, and the store's records
page_rows() {
	q "SELECT count(*) || '|' || count(DISTINCT ctid) FROM gpuivf_list_items('t_v_idx')"
}
store_rows() {
	q "SELECT rows FROM gpuindex_stats WHERE index_name = 't_v_idx'"
}

# compare NAME: the store against the table and the pages
compare() {
	local heap pages
	heap=$(heap_rows)
	check "$1: exhaustive index scan returns exactly the table's rows" "$heap" "$(index_rows)"
	check "$1: batch search returns exactly the table's rows" "$heap" "$(batch_rows)"
	pages=$(page_rows)
	check "$1: the store holds as many records as the pages, each once" \
		"${pages%%|*}|${pages%%|*}" "$(store_rows)|${pages#*|}"
	echo "# $1: rows|md5 $heap, page records|distinct $pages"
}

# drop the store: restart the device service, or roll back a DROP INDEX
drop_store() {
	if [ "$1" = restart ]; then
		q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
	else
		q "SET lock_timeout = '5s'; BEGIN; DROP INDEX t_v_idx; ROLLBACK;" >/dev/null
	fi
}

# round N HOW: the clients write, search and VACUUM for 4 s; after 1 s the
# store is dropped (HOW) and a search reloads it at once, racing with the
# writers (and with their own searches, which may load it too); then the
# store that load left, kept up to date by the writers, is compared with
# the table and the pages, without any further load
round() {
	as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 8 -j 4 -T 4 \
		-f '$dir/insert.sql@6' -f '$dir/delete.sql@5' -f '$dir/search.sql@2' postgres" \
		>"$dir/pgbench-$1.log" 2>&1 &
	local bench=$!
	as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 1 -T 4 -f '$dir/vacuum.sql' postgres" \
		>"$dir/vacuum-$1.log" 2>&1 &
	local vac=$!
	sleep 1
	drop_store $2
	q "SET enable_seqscan = off; SET gpuivf.probes = 1;
	   SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> $qvec LIMIT 1) s" >/dev/null
	wait $bench
	wait $vac
	grep -E "^number of transactions actually processed" "$dir/pgbench-$1.log" | sed "s/^/# round $1: /"
	if grep -q "number of failed transactions: 0" "$dir/pgbench-$1.log" &&
		grep -q "number of failed transactions: 0" "$dir/vacuum-$1.log"; then
		pass "round $1 ($2): writes, searches and VACUUM without errors"
	else
		fail "round $1 ($2): writes, searches and VACUUM without errors"
		tail -20 "$dir/pgbench-$1.log" "$dir/vacuum-$1.log"
	fi
	check "round $1 ($2): the store was reloaded" 1 \
		"$(q "SELECT loads FROM gpuindex_stats WHERE index_name = 't_v_idx'" | awk '{print ($1 >= 1)}')"
	compare "round $1 ($2)"
}

check "plan: an exhaustive index scan" 1 \
	"$(q "SET enable_seqscan = off; SET enable_bitmapscan = off; SET gpuivf.probes = 16;
	      EXPLAIN (COSTS OFF) SELECT ctid FROM t ORDER BY v <-> $qvec" | grep -c 't_v_idx')"

round 1 restart
round 2 drop
round 3 restart
round 4 drop

# and loaded again from the pages with nobody writing
drop_store restart
sleep 1.5
compare "after another service restart"
drop_store drop
check "a rolled-back DROP INDEX dropped the store" 0 \
	"$(q "SELECT count(*) FROM gpuindex_stats WHERE index_name = 't_v_idx'")"
compare "after another rolled-back DROP INDEX"

q "VACUUM (INDEX_CLEANUP ON) t" >/dev/null
check "after VACUUM the store holds exactly the live rows" "$(q "SELECT count(*) FROM t")" \
	"$(store_rows)"

echo "gpuivf load under writes: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
