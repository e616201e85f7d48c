#!/bin/bash
# One index over several devices: with gpuindex.devices = 2 and 3 (logical
# devices on the host backend, or on one GPU), every store is spread over
# that many shards.  The answers of gpuivf (flat, L2 and cosine; pq),
# gpusparse and genie, through ORDER BY ... LIMIT and the batch API, must
# equal a sequential scan's where the index is exact (ties by ctid, as the
# index breaks them) and, row for row, the same searches with one device
# everywhere; also after inserts, deletes and VACUUM made while spread, a
# restart of the service alone and a server restart with another number of
# devices.  The records must really be spread (each shard holds some, IVF
# lists whole on one shard), the bytes of the shards must add up to what
# gpuindex_stats and gpuindex_service() report, stores must stay within
# gpuindex.memory_limit, an index that does not fit it must be searched in
# parts with the same answers,
# DROP INDEX must drop every shard, and the pg_regress suite must pass with
# two devices.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-multidev-test}
port=$((${GPUINDEX_TEST_PORT_MULTIDEV:-54379} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }
qf() { cluster_psql "$dir" $port -At -f "$1" 2>&1; }
setting() {
	as_pg "sed -i '/^$1 /d' '$dir/data/postgresql.conf'; echo '$1 = $2' >> '$dir/data/postgresql.conf'"
}
# restart the server with gpuindex.devices = $1 (the stores reload from the pages)
devices() {
	setting gpuindex.devices "$1"
	as_pg "pg_ctl -D '$dir/data' -l '$dir/server.log' -w -t 60 restart >/dev/null" || {
		tail -20 "$dir/server.log"
		exit 1
	}
	check "the service runs $1 devices" "$1" "$(q "SELECT devices FROM gpuindex_service()")"
}

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.devices = 1" || exit 1

# small whole numbers, so that distances tie exactly and are exact in float
out=$(q "CREATE EXTENSION gpuindex;
   SELECT setseed(0.31);
   CREATE TABLE v (id int, e real[]);
   INSERT INTO v SELECT i, ARRAY(SELECT floor(random() * 5)::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(1, 6000) i;
   CREATE INDEX v_e ON v USING gpuivf (e) WITH (lists = 24);
   CREATE TABLE c (id int, e real[]);
   INSERT INTO c SELECT i, ARRAY(SELECT floor(random() * 5 - 2)::real FROM generate_series(1, 6) WHERE i > 0)
   FROM generate_series(1, 4000) i;
   CREATE INDEX c_e ON c USING gpuivf (e real_cosine_ops) WITH (lists = 16);
   CREATE TABLE p (id int, e real[]);
   INSERT INTO p SELECT i, ARRAY(SELECT (random() * 4)::real FROM generate_series(1, 16) WHERE i > 0)
   FROM generate_series(1, 5000) i;
   CREATE INDEX p_e ON p USING gpuivf (e) WITH (lists = 20, quantizer = 'pq', pq_m = 4);
   CREATE TABLE sp (id int, v spvec(300));
   INSERT INTO sp SELECT i, (SELECT ('{' || string_agg(t || ':' || (1 + (t * i) % 4) * 0.5, ',' ORDER BY t) || '}/300')
	 FROM (SELECT DISTINCT (1 + floor(299 * random() ^ 2))::int t FROM generate_series(1, 12) WHERE i > 0) x)::spvec
   FROM generate_series(1, 12000) i;
   CREATE INDEX sp_v ON sp USING gpusparse (v);
   CREATE TABLE s (id int, a int[]);
   INSERT INTO s SELECT i, ARRAY(SELECT (random() * random() * 200)::int FROM generate_series(1, 10) WHERE i > 0)
   FROM generate_series(1, 12000) i;
   CREATE INDEX s_a ON s USING genie (a) WITH (lists = 64);" 2>&1)
check "tables and indexes created" "" "$(echo "$out" | grep -E 'ERROR|FATAL')"

# the searches: 24 queries per index and the batch APIs (at least 16, so that
# the shards of a batch search at the same time)
cat >"$dir/answers.sql" <<'EOF'
SET enable_seqscan = off;
CREATE TEMP TABLE qs AS SELECT g,
  ARRAY(SELECT ((g * 7 + j * 3) % 5)::real FROM generate_series(1, 8) j) qv,
  ARRAY(SELECT ((g * 5 + j * 2) % 5 - 2)::real FROM generate_series(1, 6) j) qc,
  ARRAY(SELECT ((g * 3 + j) % 4)::real FROM generate_series(1, 16) j) qp,
  ('{' || (g * 7) % 300 + 1 || ':1,' || (g * 13) % 150 + 151 || ':2,' || g % 20 + 1 || ':0.5}/300')::spvec qsp,
  ARRAY[g, g + 1, g * 2, g * 3 % 40, 7] qs
  FROM generate_series(1, 24) g;
SET gpuivf.probes = 24;
SELECT 'ivf_all', g, (SELECT array_agg(id) FROM (SELECT id FROM v ORDER BY e <-> qv LIMIT 10) x) FROM qs ORDER BY g;
SET gpuivf.probes = 3;
SELECT 'ivf_3', g, (SELECT array_agg(id) FROM (SELECT id FROM v ORDER BY e <-> qv LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'ivf_batch', query, array_agg(key ORDER BY distance, key) FROM gpuivf_search('v_e',
  ARRAY(SELECT qv FROM qs ORDER BY g), 12, 'id', NULL::int) GROUP BY query ORDER BY query;
SET gpuivf.probes = 16;
SELECT 'cos_all', g, (SELECT array_agg(id) FROM (SELECT id FROM c ORDER BY e <=> qc LIMIT 10) x) FROM qs ORDER BY g;
SET gpuivf.probes = 4;
SELECT 'pq', g, (SELECT array_agg(id) FROM (SELECT id FROM p ORDER BY e <-> qp LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'pq_batch', query, array_agg(key ORDER BY distance, key) FROM gpuivf_search('p_e',
  ARRAY(SELECT qp FROM qs ORDER BY g), 10, 'id', NULL::int) GROUP BY query ORDER BY query;
SELECT 'sparse', g, (SELECT array_agg(id) FROM (SELECT id FROM sp ORDER BY v <#> qsp LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'sparse_batch', query, array_agg(key ORDER BY distance, key) FROM gpusparse_search('sp_v',
  ARRAY(SELECT qsp FROM qs ORDER BY g), 10, 'id', NULL::int) GROUP BY query ORDER BY query;
SELECT 'genie', g, (SELECT array_agg(id) FROM (SELECT id FROM s ORDER BY a <&> qs LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'genie_d', g, (SELECT array_agg(d) FROM (SELECT a <&> qs d FROM s ORDER BY a <&> qs LIMIT 10) x) FROM qs ORDER BY g;
EOF
# the same where the index is exact, by sequential scans (ties by ctid)
cat >"$dir/reference.sql" <<'EOF'
SET enable_indexscan = off; SET enable_bitmapscan = off;
CREATE TEMP TABLE qs AS SELECT g,
  ARRAY(SELECT ((g * 7 + j * 3) % 5)::real FROM generate_series(1, 8) j) qv,
  ARRAY(SELECT ((g * 5 + j * 2) % 5 - 2)::real FROM generate_series(1, 6) j) qc,
  ('{' || (g * 7) % 300 + 1 || ':1,' || (g * 13) % 150 + 151 || ':2,' || g % 20 + 1 || ':0.5}/300')::spvec qsp,
  ARRAY[g, g + 1, g * 2, g * 3 % 40, 7] qs
  FROM generate_series(1, 24) g;
SELECT 'ivf_all', g, (SELECT array_agg(id) FROM (SELECT id FROM v ORDER BY e <-> qv, ctid LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'cos_all', g, (SELECT array_agg(id) FROM (SELECT id FROM c ORDER BY e <=> qc, ctid LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'sparse', g, (SELECT array_agg(id) FROM (SELECT id FROM sp ORDER BY v <#> qsp, ctid LIMIT 10) x) FROM qs ORDER BY g;
SELECT 'genie_d', g, (SELECT array_agg(d) FROM (SELECT a <&> qs d FROM s ORDER BY a <&> qs LIMIT 10) x) FROM qs ORDER BY g;
EOF
kinds="ivf_all ivf_3 ivf_batch cos_all pq pq_batch sparse sparse_batch genie genie_d"
exact="ivf_all cos_all sparse genie_d"

# answers of this state against the sequential scans, every kind answered
answers() {
	local got ref
	got=$(qf "$dir/answers.sql")
	ref=$(qf "$dir/reference.sql")
	check "$1: every query of every kind answered" 240 "$(echo "$got" | grep -c -E '^[a-z_0-9]+\|[0-9]+\|\{')" ||
		echo "$got" | grep -E 'ERROR|DETAIL' | head -5 | sed 's/^/# /'
	for kind in $exact; do
		check "$1: $kind equals a sequential scan" "$(echo "$ref" | grep "^$kind|")" "$(echo "$got" | grep "^$kind|")"
	done
	printf '%s\n' "$got" >"$dir/answers.$2"
}
# answers of two runs equal, kind by kind
same() {
	for kind in $kinds; do
		check "$1: $kind as with $4" "$(grep "^$kind|" "$dir/answers.$3")" "$(grep "^$kind|" "$dir/answers.$2")"
	done
}
# every index spread over $1 shards, each holding some of its rows, all of them
spread() {
	local bad
	bad=$(q "SELECT string_agg(index_name || ': ' || n || ' shards, ' || rows || ' rows, ' || empty || ' empty', '; ')
	  FROM (SELECT index_name, count(*) n, sum(rows) rows, count(*) FILTER (WHERE rows = 0) empty,
	  count(DISTINCT device) devs FROM gpuindex_store_shards() GROUP BY index_name) x
	  WHERE n <> $1 OR devs <> $1 OR empty > 0 OR rows <> (SELECT rows FROM gpuindex_stats st WHERE st.index_name = x.index_name)")
	check "$2: every store in $1 shards on $1 devices, none empty, their rows the store's" "" "$bad"
	check "$2: 5 stores" 5 "$(q "SELECT count(*) FROM gpuindex_stats")"
	check "$2: rows of the L2 stores equal the tables'" \
		"$(q "SELECT (SELECT count(*) FROM p) || ',' || (SELECT count(*) FROM v)")" \
		"$(q "SELECT string_agg(rows::text, ',' ORDER BY index_name) FROM gpuindex_stats WHERE index_name IN ('v_e', 'p_e')")"
	check "$2: the shards' bytes add up to gpuindex_stats and gpuindex_service()" 1 \
		"$(q "SELECT ((SELECT sum(bytes) FROM gpuindex_store_shards()) = (SELECT sum(bytes) FROM gpuindex_stats)
		  AND (SELECT sum(bytes) FROM gpuindex_stats) = (SELECT bytes FROM gpuindex_service()))::int")"
}

# state A: as built, on 1, 2 and 3 devices
answers "1 device" a1
q "SELECT index_name || ':' || slabs_used FROM gpuindex_stats WHERE index_name IN ('v_e', 'c_e', 'p_e') ORDER BY 1" >"$dir/slabs.1"
check "one device: one shard per store" 5 "$(q "SELECT count(*) FROM gpuindex_store_shards() WHERE shards = 1")"
for n in 2 3; do
	devices $n
	answers "$n devices" a$n
	same "$n devices" a$n a1 "1 device"
	spread $n "$n devices"
	# a list's records on one shard: as many slabs as one store holds
	check "$n devices: IVF lists whole on one shard (slabs as with one device)" "$(cat "$dir/slabs.1")" \
		"$(q "SELECT index_name || ':' || slabs_used FROM gpuindex_stats WHERE index_name IN ('v_e', 'c_e', 'p_e') ORDER BY 1")"
done
echo "# $(q "SELECT string_agg(index_name || ' ' || rows_by_shard, ', ' ORDER BY index_name) FROM (SELECT index_name,
  string_agg(rows::text, '/' ORDER BY shard) rows_by_shard FROM gpuindex_store_shards() GROUP BY index_name) x")"

# state B: inserts, deletes and VACUUM with 3 devices, then 1
writes() {
	out=$(q "SELECT setseed($1);
	  INSERT INTO v SELECT i, ARRAY(SELECT floor(random() * 5)::real FROM generate_series(1, 8) WHERE i > 0) FROM generate_series(20001, 21500) i;
	  INSERT INTO c SELECT i, ARRAY(SELECT floor(random() * 5 - 2)::real FROM generate_series(1, 6) WHERE i > 0) FROM generate_series(20001, 21000) i;
	  INSERT INTO p SELECT i, ARRAY(SELECT (random() * 4)::real FROM generate_series(1, 16) WHERE i > 0) FROM generate_series(20001, 21000) i;
	  INSERT INTO sp SELECT i, (SELECT ('{' || string_agg(t || ':' || (1 + (t * i) % 4) * 0.5, ',' ORDER BY t) || '}/300')
		FROM (SELECT DISTINCT (1 + floor(299 * random() ^ 2))::int t FROM generate_series(1, 12) WHERE i > 0) x)::spvec
	  FROM generate_series(20001, 21000) i;
	  INSERT INTO s SELECT i, ARRAY(SELECT (random() * random() * 200)::int FROM generate_series(1, 10) WHERE i > 0) FROM generate_series(20001, 21000) i;
	  DELETE FROM v WHERE id % $2 = 0; DELETE FROM c WHERE id % $2 = 1; DELETE FROM p WHERE id % $2 = 2;
	  DELETE FROM sp WHERE id % $2 = 3; DELETE FROM s WHERE id % $2 = 4;" 2>&1;
	  q "VACUUM (INDEX_CLEANUP ON) v, c, p, sp, s")
	check "$3: inserts, deletes and VACUUM" "" "$(echo "$out" | grep -E 'ERROR|FATAL')"
}
writes 0.5 5 "3 devices"
check "3 devices: the stores saw the deletes" 1 "$(q "SELECT (sum(deletes) > 0)::int FROM gpuindex_store_shards() WHERE index_name = 'v_e'")"
answers "3 devices after writes" b3
spread 3 "3 devices after writes"
devices 1
answers "1 device after writes" b1
same "3 devices after writes" b3 b1 "1 device"

# state C: more writes with 2 devices, a restart of the service alone, a server restart
devices 2
answers "2 devices, reloaded" b2
same "2 devices, reloaded" b2 b1 "1 device"
writes 0.6 7 "2 devices"
answers "2 devices after writes" c2
spread 2 "2 devices after writes"
gen=$(q "SELECT generation FROM gpuindex_service()")
q "SELECT pg_terminate_backend(pid) FROM gpuindex_service()" >/dev/null
for i in $(seq 1 50); do
	g=$(q "SELECT generation FROM gpuindex_service()" 2>/dev/null)
	[ -n "$g" ] && [ "$g" != "$gen" ] && break
	sleep 0.2
done
check "the service restarted alone" 1 "$([ "$(q "SELECT generation FROM gpuindex_service()")" -gt "$gen" ] && echo 1)"
answers "2 devices after a service restart" r2
same "2 devices after a service restart" r2 c2 "2 devices before it"
spread 2 "2 devices after a service restart"
# store sizes with 2 devices, for the limit below
ivf2=$(q "SELECT sum(bytes) FROM gpuindex_stats WHERE index_name IN ('v_e', 'c_e', 'p_e')")
post=$(q "SELECT least(sum(bytes) FILTER (WHERE index_name = 'sp_v'), sum(bytes) FILTER (WHERE index_name = 's_a')) FROM gpuindex_stats")
devices 1
answers "1 device after the second writes" c1
same "2 devices after writes" c2 c1 "1 device"

# a limit that holds the IVF stores, spread, and half the smaller of genie's
# and gpusparse's stores: those do not fit and are searched in parts (a
# session's part store on one device)
mb=$(q "SELECT ceil(($ivf2 * 1.05 + $post / 2.0) / 1048576)::int")
setting gpuindex.memory_limit ${mb}MB
devices 2
answers "2 devices, $mb MB" m2
same "2 devices, $mb MB" m2 c1 "1 device and no limit"
check "2 devices, $mb MB: the IVF stores are held, spread" 6 \
	"$(q "SELECT count(*) FROM gpuindex_store_shards() WHERE index_name IN ('v_e', 'c_e', 'p_e')")"
check "2 devices, $mb MB: the stores held stay within the limit" 1 \
	"$(q "SELECT (bytes <= $mb * 1024 * 1024)::int FROM gpuindex_service()")"
echo "# limit $mb MB: IVF stores $ivf2 bytes with 2 devices, the smaller posting-list store $post; held now:" \
	"$(q "SELECT string_agg(index_name || ' ' || bytes, ', ' ORDER BY index_name) FROM gpuindex_stats")"
check "2 devices, $mb MB: genie and gpusparse searched in parts" 2 \
	"$(cluster_psql "$dir" $port -At -c "SET client_min_messages = debug1; SET enable_seqscan = off;" \
		-c "SELECT count(*) FROM (SELECT id FROM s ORDER BY a <&> '{1,2,3}' LIMIT 5) x" \
		-c "SELECT count(*) FROM (SELECT id FROM sp ORDER BY v <#> '{1:1,2:1}/300' LIMIT 5) x" 2>&1 |
		grep -c 'searched in [0-9]* parts')"
setting gpuindex.memory_limit 0
devices 2

# DROP INDEX drops every shard
answers "2 devices, no limit" d2
before=$(q "SELECT count(*) FROM gpuindex_store_shards()")
q "DROP INDEX sp_v" >/dev/null
check "DROP INDEX drops the index's 2 shards" $((before - 2)) "$(q "SELECT count(*) FROM gpuindex_store_shards()")"
check "none of them stays" 0 "$(q "SELECT count(*) FROM gpuindex_store_shards() WHERE index_name = 'sp_v'")"

# the pg_regress suite with two devices
if GPUINDEX_TEST_DEVICES=2 GPUINDEX_TEST_PORT=$((${GPUINDEX_TEST_PORT_MULTIDEV_REGRESS:-54378})) \
	bash "$here/regress.sh" "$dir/regress" >"$dir/regress.out" 2>&1; then
	pass "pg_regress with gpuindex.devices = 2: $(grep -o 'All [0-9]* tests passed' "$dir/regress.out")"
else
	fail "pg_regress with gpuindex.devices = 2"
	grep -E 'FAILED|failed|^[-+]' "$dir/regress.out" | head -40 | sed 's/^/# /'
fi

echo "multi device: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
