#!/bin/bash
# An index whose store does not fit gpuindex.memory_limit is searched in
# parts (GENIE's multiple loading): CREATE INDEX says so with a NOTICE,
# and every search loads the index's rows part by part into a private store
# and merges the parts' top-k.  The answers must equal, row for row and in
# order, those of the same searches with no limit (the whole store), for
# genie (int sets), gpusparse and gpuivf, through ORDER BY ... LIMIT and the
# batch API; their distances must equal a sequential scan's; no part store
# may stay behind; a part store left by a cancelled search goes when its
# session ends.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-parts-test}
port=$((${GPUINDEX_TEST_PORT_PARTS:-54383} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }
qf() { cluster_psql "$dir" $port -At -f "$1" 2>&1; }
set_limit() {
	as_pg "sed -i '/^gpuindex.memory_limit/d' '$dir/data/postgresql.conf'; echo 'gpuindex.memory_limit = $1' >> '$dir/data/postgresql.conf'"
	q "SELECT pg_reload_conf()" >/dev/null
	# the service takes the setting at its next round
	for i in $(seq 1 50); do
		[ "$(q "SHOW gpuindex.memory_limit")" = "$2" ] && break
		sleep 0.1
	done
	q "SELECT count(*) FROM gpuindex_store_stats()" >/dev/null
	sleep 0.3
}

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.memory_limit = 2MB" || exit 1

# three tables whose stores take 2.5-10 MB each on either backend: 2 MB holds
# none of them (a whole store within the limit would leave the others' parts
# no room)
out=$(q "CREATE EXTENSION gpuindex;
   SELECT setseed(0.42);
   CREATE TABLE s (id int, a int[]);
   INSERT INTO s SELECT i, ARRAY(SELECT (random() * 400)::int FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(1, 4000) i;
   CREATE TABLE sp (id int, v spvec);
   INSERT INTO sp SELECT i, (SELECT ('{' || string_agg(t || ':' || (1 + (t * i) % 5), ',' ORDER BY t) || '}/500')
	 FROM (SELECT DISTINCT (1 + floor(499 * random() ^ 2))::int t FROM generate_series(1, 16) WHERE i > 0) x)::spvec
   FROM generate_series(1, 4000) i;
   CREATE TABLE v (id int, e real[]);
   INSERT INTO v SELECT i, ARRAY(SELECT round((random() * 8)::numeric, 1)::real FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(1, 40000) i;
   CREATE INDEX s_a ON s USING genie (a);
   CREATE INDEX sp_v ON sp USING gpusparse (v);
   CREATE INDEX v_e ON v USING gpuivf (e) WITH (lists = 20);")
check "each CREATE INDEX says the index will be searched in parts" 3 \
	"$(echo "$out" | grep -c 'does not fit the gpuindex memory budget: its searches will load it in parts')" ||
	echo "$out" | grep -E 'NOTICE|DETAIL|ERROR' | sed 's/^/# /'

# the queries: 12 of each kind, with many ties (small integers, few values)
cat >"$dir/answers.sql" <<'EOF'
SET enable_seqscan = off;
SET gpuivf.probes = 20;
SET client_min_messages = debug1;
SELECT 'genie', g, array_agg(id) FROM (SELECT g, q FROM (SELECT g, ARRAY(SELECT (hashint4(g * 31 + j) % 400 + 400) % 400
  FROM generate_series(1, 10) j) q FROM generate_series(1, 12) g) x) qs,
  LATERAL (SELECT id FROM s ORDER BY a <&> qs.q LIMIT 10) r GROUP BY g ORDER BY g;
SELECT 'sparse', g, array_agg(id) FROM (SELECT g, ('{' || (g * 7) % 500 + 1 || ':1,' || (g * 13) % 500 + 251 || ':2,'
  || (g % 50) + 101 || ':0.5}/500')::spvec q FROM generate_series(1, 12) g) qs,
  LATERAL (SELECT id FROM sp ORDER BY v <#> qs.q LIMIT 10) r GROUP BY g ORDER BY g;
SELECT 'ivf', g, array_agg(id) FROM (SELECT g, (SELECT e FROM v WHERE id = g * 97) q FROM generate_series(1, 12) g) qs,
  LATERAL (SELECT id FROM v ORDER BY e <-> qs.q LIMIT 10) r GROUP BY g ORDER BY g;
SELECT 'batch', query, array_agg(key ORDER BY distance, key) FROM gpuivf_search('v_e', ARRAY(SELECT e FROM v WHERE id % 1000 = 1 AND id < 12000 ORDER BY id),
  10, 'id', NULL::int) GROUP BY query ORDER BY query;
EOF
parted=$(qf "$dir/answers.sql")
echo "# $(echo "$parted" | grep -o 'index "[a-z_]*" searched in [0-9]* parts' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
check "genie, gpusparse and gpuivf searches were answered in parts" 1 \
	"$(echo "$parted" | grep -q 'searched in [0-9]* parts' && echo 1)"
check "no part store stays behind" 0 "$(q "SELECT count(*) FROM gpuindex_store_stats()")"
check "searches do not load the whole index again once it did not fit" 1 \
	"$(echo "$parted" | grep -q 'did not fit lately: not loaded again' && echo 1)"
check "every query of every kind answered" 48 "$(echo "$parted" | grep -c -E '^(genie|sparse|ivf|batch)\|')" ||
	echo "$parted" | grep -E 'ERROR|DETAIL' | head -5 | sed 's/^/# /'

# the same searches on the whole store (no limit)
set_limit 0 0
whole=$(qf "$dir/answers.sql")
check "the whole stores are loaded without a limit" 3 "$(q "SELECT count(*) FROM gpuindex_store_stats()")"
check "searches of the whole stores are not parted" 0 "$(echo "$whole" | grep -c 'searched in')"
for kind in genie sparse ivf batch; do
	check "$kind: parted answers equal the whole store's, row for row" \
		"$(echo "$whole" | grep "^$kind|")" "$(echo "$parted" | grep "^$kind|")"
done

# distances against sequential scans (the ids may differ only in ties)
cat >"$dir/dist.sql" <<'EOF'
SET enable_seqscan = off;
CREATE TEMP TABLE qs AS SELECT g, ARRAY(SELECT (hashint4(g * 31 + j) % 400 + 400) % 400 FROM generate_series(1, 10) j) q
  FROM generate_series(1, 12) g;
CREATE TEMP TABLE ri AS SELECT g, (SELECT array_agg(d ORDER BY d) FROM (SELECT a <&> qs.q d FROM s ORDER BY a <&> qs.q LIMIT 10) x) r FROM qs;
SET enable_seqscan = on; SET enable_indexscan = off; SET enable_bitmapscan = off;
CREATE TEMP TABLE rs AS SELECT g, (SELECT array_agg(d ORDER BY d) FROM (SELECT a <&> qs.q d FROM s ORDER BY a <&> qs.q LIMIT 10) x) r FROM qs;
SELECT count(*) FILTER (WHERE ri.r IS DISTINCT FROM rs.r) FROM ri JOIN rs USING (g);
EOF
# back to 2 MB, without the whole stores (a restart empties the service)
set_limit 2MB 2MB
as_pg "pg_ctl -D '$dir/data' -l '$dir/server.log' -w -t 60 restart >/dev/null"
check "genie in parts: top-10 match counts equal a sequential scan's" 0 "$(qf "$dir/dist.sql" | tail -1)"

# a search cancelled in the middle of its parts: its part store goes with the session
out=$(cluster_psql "$dir" $port -At -c "SET enable_seqscan = off; SET statement_timeout = '30ms';" \
	-c "SELECT count(*) FROM generate_series(1, 400) g, LATERAL (SELECT id FROM s ORDER BY a <&> ARRAY[g, g + 1, g + 2] LIMIT 10) r" 2>&1)
check "the search was cancelled by its timeout" 1 "$(echo "$out" | grep -c 'statement timeout')"
for i in $(seq 1 30); do [ "$(q "SELECT count(*) FROM gpuindex_store_stats()")" = 0 ] && break; sleep 0.1; done
check "no part store stays after the cancelled session ended" 0 "$(q "SELECT count(*) FROM gpuindex_store_stats()")"

echo "multiple loading: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
