#!/bin/bash
# One index spread over several PostgreSQL servers with postgres_fdw: a
# coordinator and two shard servers, each with gpuindex preloaded.  On the
# coordinator a table hash-partitioned by id has two foreign partitions, one
# per shard; each shard holds a plain table with its own gpuivf (real[]) and
# gpusparse (spvec) index.  The coordinator's ORDER BY ... LIMIT 10, in the
# plain form (a Merge Append of sorted foreign scans) and in the per-shard
# UNION ALL form (an async Append of foreign scans with the LIMIT pushed
# down), must return, in order, the ids of an exact sequential scan over the
# same rows in one local table; so must the helper function of
# docs/scale-out.md, filtered queries, prepared statements with a generic
# plan, queries after inserts made through the coordinator (which must land
# in the shard the partition bounds name) and, for gpusparse, the plain form.
# The plans must ship what docs/scale-out.md says.  The shards search exactly
# (gpuivf.probes = lists, set per database), and the data has no distance ties
# among any query's 11 nearest rows, so the order is well defined; with one
# probed list, set through the foreign servers' options, the answers differ.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-scaleout-test}
port=$((${GPUINDEX_TEST_PORT_SCALEOUT:-54380} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
coord=$dir/coord
shard1=$dir/shard1 sport1=$((port + 1))
shard2=$dir/shard2 sport2=$((port + 2))
rm -rf "$dir"
pg_scratch "$dir"
trap "rc=\$?; cluster_stop '$coord'; cluster_stop '$shard1'; cluster_stop '$shard2';
	[ \$rc = 0 ] && scratch_remove '$dir'" EXIT
q() { cluster_psql "$coord" $port -Atc "$1" 2>&1; }
s1() { cluster_psql "$shard1" $sport1 -Atc "$1" 2>&1; }
s2() { cluster_psql "$shard2" $sport2 -Atc "$1" 2>&1; }
# the rows of an EXPLAIN that name remote SQL, with vector literals shortened
remote_sql() { echo "$1" | grep 'Remote SQL:' | sed -E "s/'\{[^}]*\}'/'{...}'/g; s/^ *//"; }

for c in "$coord $port" "$shard1 $sport1" "$shard2 $sport2"; do
	set -- $c
	cluster_start "$1" "$2" "shared_preload_libraries = 'gpuindex'" \
		"gpuindex.device = $GPUINDEX_TEST_DEVICE" "shared_buffers = 32MB" || exit 1
done

# shards: plain tables, indexed once the rows are in
for s in s1 s2; do
	$s "CREATE EXTENSION gpuindex;
	    CREATE TABLE items (id int PRIMARY KEY, category int, embedding real[]);
	    CREATE TABLE docs (id int PRIMARY KEY, v spvec);
	    CREATE VIEW session_probes AS SELECT current_setting('gpuivf.probes') AS probes;" >/dev/null
done

# coordinator: one foreign server per shard whose connections may ship
# gpuindex's operators and run asynchronously; the partitioned tables; and
# the same rows in local reference tables, which have no index (exact
# sequential scans)
out=$(q "CREATE EXTENSION gpuindex;
   CREATE EXTENSION postgres_fdw;
   CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$shard1', port '$sport1',
	 dbname 'postgres', extensions 'gpuindex', async_capable 'true', batch_size '500');
   CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$shard2', port '$sport2',
	 dbname 'postgres', extensions 'gpuindex', async_capable 'true', batch_size '500');
   CREATE USER MAPPING FOR CURRENT_USER SERVER shard1 OPTIONS (user 'postgres');
   CREATE USER MAPPING FOR CURRENT_USER SERVER shard2 OPTIONS (user 'postgres');
   CREATE TABLE items (id int, category int, embedding real[]) PARTITION BY HASH (id);
   CREATE FOREIGN TABLE items_s1 PARTITION OF items FOR VALUES WITH (MODULUS 2, REMAINDER 0)
	 SERVER shard1 OPTIONS (table_name 'items');
   CREATE FOREIGN TABLE items_s2 PARTITION OF items FOR VALUES WITH (MODULUS 2, REMAINDER 1)
	 SERVER shard2 OPTIONS (table_name 'items');
   CREATE TABLE docs (id int, v spvec) PARTITION BY HASH (id);
   CREATE FOREIGN TABLE docs_s1 PARTITION OF docs FOR VALUES WITH (MODULUS 2, REMAINDER 0)
	 SERVER shard1 OPTIONS (table_name 'docs');
   CREATE FOREIGN TABLE docs_s2 PARTITION OF docs FOR VALUES WITH (MODULUS 2, REMAINDER 1)
	 SERVER shard2 OPTIONS (table_name 'docs');
   CREATE FOREIGN TABLE probes_s1 (probes text) SERVER shard1 OPTIONS (table_name 'session_probes');
   CREATE FOREIGN TABLE probes_s2 (probes text) SERVER shard2 OPTIONS (table_name 'session_probes');
   SELECT setseed(0.31);
   CREATE TABLE ref (id int PRIMARY KEY, category int, embedding real[]);
   INSERT INTO ref SELECT i, i % 5, ARRAY(SELECT random()::real FROM generate_series(1, 16) WHERE i > 0)
	 FROM generate_series(1, 6000) i;
   CREATE TABLE qs AS SELECT g AS qid, ARRAY(SELECT random()::real FROM generate_series(1, 16) WHERE g > 0) AS q
	 FROM generate_series(1, 8) g;
   CREATE TABLE sref (id int PRIMARY KEY, v spvec);
   INSERT INTO sref SELECT i, (SELECT ('{' || string_agg(t || ':' || (0.05 + random())::real, ',' ORDER BY t) || '}/300')
	 FROM (SELECT DISTINCT (1 + floor(300 * random()))::int t FROM generate_series(1, 12) WHERE i > 0) x)::spvec
	 FROM generate_series(1, 3000) i;
   CREATE TABLE sqs AS SELECT g AS qid, (SELECT ('{' || string_agg(t || ':' || (0.05 + random())::real, ',' ORDER BY t) || '}/300')
	 FROM (SELECT DISTINCT (1 + floor(300 * random()))::int t FROM generate_series(1, 6) WHERE g > 0) x)::spvec AS q
	 FROM generate_series(1, 6) g;
   INSERT INTO items SELECT * FROM ref;
   INSERT INTO docs SELECT * FROM sref;" 2>&1)
check "coordinator set up, rows inserted through the partitioned tables" "" "$(echo "$out" | grep -E 'ERROR|FATAL')"

# the independent reference: every query's 11 nearest rows by a sequential
# scan have distinct distances (no tie decides the order or the cut)
check "no distance ties among the reference's 11 nearest rows (real[], spvec)" "0|0" \
	"$(q "SET enable_indexscan = off; SET enable_bitmapscan = off;
	   SELECT (SELECT count(*) FROM qs, LATERAL (SELECT d, lead(d) OVER (ORDER BY d) nd
	     FROM (SELECT embedding <-> qs.q d FROM ref ORDER BY 1 LIMIT 11) x) y WHERE nd - d < 1e-6 * nd),
	   (SELECT count(*) FROM sqs, LATERAL (SELECT d, lead(d) OVER (ORDER BY d) nd
	     FROM (SELECT v <#> sqs.q d FROM sref ORDER BY 1 LIMIT 11) x) y WHERE nd - d < 1e-6 * abs(nd) OR nd >= 0)")"

# each shard holds exactly the rows whose hash the partition bound gives it
for r in 0 1; do
	s=s$((r + 1))
	check "shard $((r + 1)) holds exactly the rows of hash remainder $r" \
		"$(q "SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM ref
		      WHERE satisfies_hash_partition('items'::regclass, 2, $r, id)")" \
		"$($s "SELECT count(*), md5(string_agg(id::text, ',' ORDER BY id)) FROM items")"
done

# shards: the indexes, and probes = lists so that the IVF search is exact;
# set per database, so that the coordinator's connections get it
for s in s1 s2; do
	$s "CREATE INDEX items_embedding ON items USING gpuivf (embedding) WITH (lists = 16);
	    CREATE INDEX docs_v ON docs USING gpusparse (v);
	    ALTER DATABASE postgres SET gpuivf.probes = 16;" >/dev/null
done
# the coordinator's statistics of the foreign partitions (ANALYZE of a
# partitioned table samples each shard): without them the planner may sort a
# filtered branch's rows itself instead of shipping its ORDER BY and LIMIT
q "ANALYZE items; ANALYZE docs;" >/dev/null

# the setting as the coordinator's own connections to the shards see it
probes="SELECT (SELECT probes FROM probes_s1), (SELECT probes FROM probes_s2)"
check "the coordinator's shard sessions run with the database's gpuivf.probes = 16" "16|16" "$(q "$probes")"

searches() { $1 "SELECT coalesce(sum(searches), 0) FROM gpuindex_stats WHERE index_name = '$2'"; }
before1=$(searches s1 items_embedding) before2=$(searches s2 items_embedding)

reference="SET enable_indexscan = off; SET enable_bitmapscan = off;
	SELECT qid, ARRAY(SELECT id FROM ref ORDER BY embedding <-> qs.q, id LIMIT 10) FROM qs ORDER BY qid"
plain="SELECT qid, ARRAY(SELECT id FROM items ORDER BY embedding <-> qs.q LIMIT 10) FROM qs ORDER BY qid"
# the UNION ALL form sorts on d + 0: its branches are not sorted by that, so
# the planner sorts their rows over an Append, which runs the foreign scans
# asynchronously, rather than merging the sorted branches (a Merge Append,
# which PostgreSQL 15 runs one branch after the other)
union="SELECT qid, ARRAY(SELECT id FROM (
	  (SELECT id, embedding <-> qs.q AS d FROM items_s1 ORDER BY embedding <-> qs.q LIMIT 10)
	  UNION ALL
	  (SELECT id, embedding <-> qs.q AS d FROM items_s2 ORDER BY embedding <-> qs.q LIMIT 10)) u
	ORDER BY d + 0, id LIMIT 10) FROM qs ORDER BY qid"
want=$(q "$reference")
check "the reference answers every query" 8 "$(echo "$want" | grep -c '^[0-9]*|{[0-9,]*}$')"
check "plain form: the coordinator's top 10 equal the exact scan's, in order" "$want" "$(q "$plain")"
check "UNION ALL form: the coordinator's top 10 equal the exact scan's, in order" "$want" "$(q "$union")"
check "both shards' gpuivf indexes served the searches" "1 1" \
	"$([ $(searches s1 items_embedding) -ge $((before1 + 16)) ] && echo 1) $([ $(searches s2 items_embedding) -ge $((before2 + 16)) ] && echo 1)"

# what PostgreSQL 15 ships to the shards, for a literal query vector
lit=$(q "SELECT q FROM qs WHERE qid = 1")
plan=$(q "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM items ORDER BY embedding <-> '$lit' LIMIT 10")
check "plain form: a Merge Append of the two foreign scans" 1 "$(echo "$plan" | grep -c 'Merge Append')"
check "plain form: each shard gets the ORDER BY <->, without the LIMIT" \
	"$(printf 'Remote SQL: SELECT id, embedding FROM public.items ORDER BY (embedding OPERATOR(public.<->) %s) ASC NULLS LAST\n' "'{...}'" "'{...}'")" \
	"$(remote_sql "$plan")"
uplan=$(q "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM (
	  (SELECT id, embedding <-> '$lit' AS d FROM items_s1 ORDER BY embedding <-> '$lit' LIMIT 10)
	  UNION ALL
	  (SELECT id, embedding <-> '$lit' AS d FROM items_s2 ORDER BY embedding <-> '$lit' LIMIT 10)) u
	ORDER BY d + 0, id LIMIT 10")
check "UNION ALL form: an Append of two async foreign scans" "1 2" \
	"$(echo "$uplan" | grep -c -- '->  Append') $(echo "$uplan" | grep -c 'Async Foreign Scan')"
check "UNION ALL form: each shard gets the ORDER BY <-> and the LIMIT" \
	"$(printf 'Remote SQL: SELECT id, embedding FROM public.items ORDER BY (embedding OPERATOR(public.<->) %s) ASC NULLS LAST LIMIT 10::bigint\n' "'{...}'" "'{...}'")" \
	"$(remote_sql "$uplan")"

# the helper of docs/scale-out.md: the UNION ALL form over the partitions
# that exist when it runs
q "CREATE FUNCTION items_knn(q real[], k int) RETURNS TABLE (id int, distance float8)
   LANGUAGE plpgsql STABLE AS \$f\$
   DECLARE
	branches text;
   BEGIN
	SELECT string_agg(format('(SELECT id, embedding <-> \$1 AS d FROM %s ORDER BY embedding <-> \$1 LIMIT \$2)',
	                         inhrelid::regclass), ' UNION ALL ')
	  INTO branches FROM pg_inherits WHERE inhparent = 'items'::regclass;
	RETURN QUERY EXECUTE 'SELECT id, d FROM (' || branches || ') s ORDER BY d + 0, id LIMIT \$2' USING q, k;
   END \$f\$" >/dev/null
check "helper function: top 10 equal the exact scan's, in order" "$want" \
	"$(q "SELECT qid, ARRAY(SELECT id FROM items_knn(qs.q, 10)) FROM qs ORDER BY qid")"

# prepared statements with a generic plan: the query vector goes to the
# shards as a parameter
first=$(echo "$want" | head -1 | cut -d'|' -f2)
check "plain form, generic plan of a prepared statement: query 1's top 10" "$first" \
	"$(q "SET plan_cache_mode = force_generic_plan;
	   PREPARE p(real[]) AS SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY embedding <-> \$1 LIMIT 10) x;
	   EXECUTE p('$lit')")"
generic_union="SET plan_cache_mode = force_generic_plan;
	PREPARE p(real[]) AS SELECT id FROM (
	  (SELECT id, embedding <-> \$1 AS d FROM items_s1 ORDER BY embedding <-> \$1 LIMIT 10)
	  UNION ALL
	  (SELECT id, embedding <-> \$1 AS d FROM items_s2 ORDER BY embedding <-> \$1 LIMIT 10)) u
	ORDER BY d + 0, id LIMIT 10;"
check "UNION ALL form, generic plan of a prepared statement: query 1's top 10" "$first" \
	"$(q "$generic_union CREATE TEMP TABLE r AS EXECUTE p('$lit'); SELECT array_agg(id) FROM r")"
gplan=$(q "$generic_union EXPLAIN (VERBOSE, COSTS OFF) EXECUTE p('$lit')")
check "UNION ALL form, generic plan: async foreign scans, the parameter and the LIMIT shipped" \
	"2 $(printf 'Remote SQL: SELECT id, embedding FROM public.items ORDER BY (embedding OPERATOR(public.<->) %s::real[]) ASC NULLS LAST LIMIT 10::bigint\n' '$1' '$1')" \
	"$(echo "$gplan" | grep -c 'Async Foreign Scan') $(remote_sql "$gplan")"
# a LIMIT given as a parameter is not shipped (the shards return rows until
# the coordinator stops fetching), but the answer is the same
check "UNION ALL form with LIMIT \$2, generic plan: query 1's top 10" "$first" \
	"$(q "SET plan_cache_mode = force_generic_plan;
	   PREPARE p(real[], int) AS SELECT array_agg(id) FROM (SELECT id FROM (
	     (SELECT id, embedding <-> \$1 AS d FROM items_s1 ORDER BY embedding <-> \$1 LIMIT \$2)
	     UNION ALL
	     (SELECT id, embedding <-> \$1 AS d FROM items_s2 ORDER BY embedding <-> \$1 LIMIT \$2)) u
	   ORDER BY d + 0, id LIMIT \$2) x;
	   EXECUTE p('$lit', 10)")"

# a filter goes to the shards with the ORDER BY; each still returns its
# nearest matching rows
check "filtered plain form (category = 3): top 10 equal the exact scan's" \
	"$(q "SET enable_indexscan = off; SELECT qid, ARRAY(SELECT id FROM ref WHERE category = 3
	      ORDER BY embedding <-> qs.q, id LIMIT 10) FROM qs ORDER BY qid")" \
	"$(q "SELECT qid, ARRAY(SELECT id FROM items WHERE category = 3 ORDER BY embedding <-> qs.q LIMIT 10)
	      FROM qs ORDER BY qid")"

fwant=$(q "SET enable_indexscan = off; SELECT qid, ARRAY(SELECT id FROM ref WHERE category = 3
	ORDER BY embedding <-> qs.q, id LIMIT 10) FROM qs ORDER BY qid")
check "filtered UNION ALL form (category = 3): top 10 equal the exact scan's" "$fwant" \
	"$(q "SELECT qid, ARRAY(SELECT id FROM (
	  (SELECT id, embedding <-> qs.q AS d FROM items_s1 WHERE category = 3 ORDER BY embedding <-> qs.q LIMIT 10)
	  UNION ALL
	  (SELECT id, embedding <-> qs.q AS d FROM items_s2 WHERE category = 3 ORDER BY embedding <-> qs.q LIMIT 10)) u
	ORDER BY d + 0, id LIMIT 10) FROM qs ORDER BY qid")"
fplan=$(q "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM (
	  (SELECT id, embedding <-> '$lit' AS d FROM items_s1 WHERE category = 3 ORDER BY embedding <-> '$lit' LIMIT 10)
	  UNION ALL
	  (SELECT id, embedding <-> '$lit' AS d FROM items_s2 WHERE category = 3 ORDER BY embedding <-> '$lit' LIMIT 10)) u
	ORDER BY d + 0, id LIMIT 10")
check "filtered UNION ALL form: async foreign scans, each shipped the WHERE, ORDER BY and LIMIT" \
	"2 $(printf 'Remote SQL: SELECT id, embedding FROM public.items WHERE ((category = 3)) ORDER BY (embedding OPERATOR(public.<->) %s) ASC NULLS LAST LIMIT 10::bigint\n' "'{...}'" "'{...}'")" \
	"$(echo "$fplan" | grep -c 'Async Foreign Scan') $(remote_sql "$fplan")"

# inserts through the coordinator: each row lands in the shard its hash
# names, the shard's index finds it at once, and the answers stay exact
q "INSERT INTO items SELECT 6000 + qid, qid % 5, q FROM qs WHERE qid <= 6;
   INSERT INTO ref SELECT 6000 + qid, qid % 5, q FROM qs WHERE qid <= 6;" >/dev/null
routed=$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM ref WHERE id > 6000
            AND satisfies_hash_partition('items'::regclass, 2, 0, id)")
routed2=$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM ref WHERE id > 6000
             AND satisfies_hash_partition('items'::regclass, 2, 1, id)")
check "inserted rows are in the shards their hash names" "$routed $routed2" \
	"$(s1 "SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id > 6000") $(s2 "SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id > 6000")"
check "the coordinator sees each inserted row in its own partition" \
	"$(echo "$routed" | tr ',' '\n' | sed 's/$/|items_s1/'; echo "$routed2" | tr ',' '\n' | sed 's/$/|items_s2/')" \
	"$(q "SELECT id, tableoid::regclass FROM items WHERE id > 6000 ORDER BY tableoid::regclass::text, id")"
want=$(q "$reference")
check "after the inserts, queries 1-6 find their own inserted row first" 6 \
	"$(echo "$want" | grep -c -E '^([1-6])\|\{600\1,')"
check "after the inserts, plain form equals the exact scan" "$want" "$(q "$plain")"
check "after the inserts, UNION ALL form equals the exact scan" "$want" "$(q "$union")"

# spvec with gpusparse (exact top-k by inner product) through the same set-up
sbefore=$(( $(searches s1 docs_v) + $(searches s2 docs_v) ))
check "gpusparse: the coordinator's ORDER BY v <#> q LIMIT 10 equals the exact scan's" \
	"$(q "SET enable_indexscan = off; SELECT qid, ARRAY(SELECT id FROM sref ORDER BY v <#> sqs.q, id LIMIT 10)
	      FROM sqs ORDER BY qid")" \
	"$(q "SELECT qid, ARRAY(SELECT id FROM docs ORDER BY v <#> sqs.q LIMIT 10) FROM sqs ORDER BY qid")"
check "gpusparse: the shards' indexes served the searches" 1 \
	"$([ $(( $(searches s1 docs_v) + $(searches s2 docs_v) )) -ge $((sbefore + 12)) ] && echo 1)"
splan=$(q "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM docs ORDER BY v <#> '{1:1,7:2}/300' LIMIT 10")
check "gpusparse: each shard gets the ORDER BY <#>" 2 \
	"$(remote_sql "$splan" | grep -c -F "ORDER BY (v OPERATOR(public.<#>) '{1:1,7:2}/300'")"

# the comparison is sensitive: one probed list of 16 (set through the
# servers' libpq options, which reach every shard connection and override
# the database setting) loses rows, and the answers differ
q "ALTER SERVER shard1 OPTIONS (ADD options '-c gpuivf.probes=1');
   ALTER SERVER shard2 OPTIONS (ADD options '-c gpuivf.probes=1');" >/dev/null
check "with gpuivf.probes = 1 on the shards the answers are not the exact ones" 1 \
	"$([ "$(q "$plain")" != "$want" ] && echo 1)"
check "the shard sessions of the coordinator run with gpuivf.probes = 1" "1|1" "$(q "$probes")"
q "ALTER SERVER shard1 OPTIONS (DROP options); ALTER SERVER shard2 OPTIONS (DROP options);" >/dev/null
check "with the option dropped the answers are exact again" "$want" "$(q "$plain")"
check "and the shard sessions run with the database's gpuivf.probes = 16 again" "16|16" "$(q "$probes")"

echo "scale-out: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
