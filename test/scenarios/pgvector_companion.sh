#!/bin/bash
# gpuindex_pgvector (contrib/gpuindex_pgvector): pgvector's vector, halfvec
# and sparsevec columns indexed by gpuivf and gpusparse.  pgvector comes from
# Debian's source package (bench/setup/pgvector.sh).  Every index's answers
# are checked against a sequential scan with pgvector's own operators, and
# against the real[] / spvec forms of the same rows.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! PG_CONFIG="$PG_CONFIG" bash "$top/bench/setup/pgvector.sh" >/dev/null; then
	echo "FAILED - pgvector could not be built from Debian's source package"
	echo "pgvector companion: 0 passed, 1 failed"
	exit 1
fi
sudo_if make -s -C "$top/contrib/gpuindex_pgvector" install PG_CONFIG="$PG_CONFIG" >/dev/null || exit 1

dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-pgvector-test}
port=$((${GPUINDEX_TEST_PORT_PGVECTOR:-54384} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

q "CREATE EXTENSION gpuindex_pgvector CASCADE;" >/dev/null
# 3,000 rows of small integers (exact in half precision), 20 queries
q "SELECT setseed(0.21);
CREATE TABLE pv (id int, r real[], v vector(12), h halfvec(12), s sparsevec(60), sp spvec);
INSERT INTO pv SELECT i, a, a::vector, a::halfvec, NULL, NULL
  FROM (SELECT i, ARRAY(SELECT (random() * 8)::int::real FROM generate_series(1, 12) WHERE i > 0) a
        FROM generate_series(1, 3000) i) x;
UPDATE pv SET s = ('{' || (id % 30) + 1 || ':' || (id % 3 + 1) || ',' || ((id * 7) % 30) + 31 || ':'
                   || (id % 5 + 1) || '}/60')::sparsevec;
UPDATE pv SET sp = s::text::spvec;
CREATE TABLE qv AS SELECT n, ARRAY(SELECT (random() * 8)::int::real FROM generate_series(1, 12) WHERE n > 0) a,
  ('{' || (n % 30) + 1 || ':1,' || ((n * 3) % 30) + 31 || ':2}/60')::sparsevec AS sq
  FROM generate_series(1, 20) n;" >/dev/null

# the index's top 10 and the sequential scan's for every query (query
# expression over qv): their ids, or (mode values) their operator values to
# 4 decimals, where float rounding may swap near ties
check() {
	local name=$1 col=$2 op=$3 qexpr=$4 mode=$5 index_sql=$6
	q "$index_sql" >/dev/null
	local got want
	local sel="id"
	[ "$mode" = values ] && sel="round(($col $op $qexpr)::numeric, 4)"
	got=$(q "SET enable_seqscan = off; SET gpuivf.probes = 10000;
		SELECT string_agg(x, ' ' ORDER BY n) FROM (SELECT n, (SELECT string_agg(v::text, ',') FROM
		  (SELECT $sel AS v FROM pv ORDER BY $col $op $qexpr LIMIT 10) t) x FROM qv) y;")
	want=$(q "SET enable_indexscan = off;
		SELECT string_agg(x, ' ' ORDER BY n) FROM (SELECT n, (SELECT string_agg(v::text, ',') FROM
		  (SELECT $sel AS v FROM pv ORDER BY $col $op $qexpr, ctid LIMIT 10) t) x FROM qv) y;")
	local plan
	plan=$(q "SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT id FROM pv
		ORDER BY $col $op (SELECT $qexpr FROM qv WHERE n = 1) LIMIT 1;")
	case "$plan" in *"Index Scan"*) ;; *) fail "$name: the ordered query does not use the index ($plan)"; return ;; esac
	if [ -n "$got" ] && [ "$got" = "$want" ]; then pass "$name: the index's top 10 equal the sequential scan's"
	else fail "$name: index [$got] scan [$want]"; fi
}
check "vector <->" v '<->' qv.a::vector ids "CREATE INDEX pv_v ON pv USING gpuivf (v) WITH (lists = 16)"
check "vector <#>" v '<#>' qv.a::vector values "DROP INDEX pv_v; CREATE INDEX pv_v ON pv USING gpuivf (v vector_ip_ops) WITH (lists = 16)"
check "vector <=>" v '<=>' qv.a::vector values "DROP INDEX pv_v; CREATE INDEX pv_v ON pv USING gpuivf (v vector_cosine_ops) WITH (lists = 16)"
check "halfvec <->" h '<->' qv.a::halfvec ids "CREATE INDEX pv_h ON pv USING gpuivf (h) WITH (lists = 16)"
check "halfvec <#>" h '<#>' qv.a::halfvec values "DROP INDEX pv_h; CREATE INDEX pv_h ON pv USING gpuivf (h halfvec_ip_ops) WITH (lists = 16)"
check "halfvec <=>" h '<=>' qv.a::halfvec values "DROP INDEX pv_h; CREATE INDEX pv_h ON pv USING gpuivf (h halfvec_cosine_ops) WITH (lists = 16)"
check "sparsevec <#>" s '<#>' qv.sq ids "CREATE INDEX pv_s ON pv USING gpusparse (s)"

# the same answers as the real[] and spvec forms of the rows
same() {
	local name=$1 a=$2 b=$3
	local x y
	x=$(q "SET enable_seqscan = off; SET gpuivf.probes = 3; $a")
	y=$(q "SET enable_seqscan = off; SET gpuivf.probes = 3; $b")
	if [ -n "$x" ] && [ "$x" = "$y" ]; then pass "$name"; else fail "$name: [$x] [$y]"; fi
}
q "DROP INDEX pv_v, pv_h; CREATE INDEX pv_v ON pv USING gpuivf (v) WITH (lists = 16);
   CREATE INDEX pv_r ON pv USING gpuivf (r) WITH (lists = 16); CREATE INDEX pv_sp ON pv USING gpusparse (sp);" >/dev/null
same "vector and real[] indexes answer alike (3 of 16 lists probed)" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY v <-> qv.a::vector LIMIT 10) t), ' ' ORDER BY n) FROM qv;" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY r <-> qv.a LIMIT 10) t), ' ' ORDER BY n) FROM qv;"
same "sparsevec and spvec indexes answer alike" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY s <#> '{5:1,40:2}/60'::sparsevec LIMIT 10) t), ' ');" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY sp <#> '{5:1,40:2}/60'::spvec LIMIT 10) t), ' ');"
same "the batch API on a vector index answers as its ordered scans" \
	"SELECT string_agg(ids, ' ' ORDER BY query) FROM (SELECT query, string_agg(key::text, ',' ORDER BY distance, key) ids FROM gpuivf_search('pv_v', (SELECT array_agg(a ORDER BY n) FROM qv), 10, 'id', NULL::int) GROUP BY query) x;" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY v <-> qv.a::vector LIMIT 10) t), ' ' ORDER BY n) FROM qv;"
# writes after the build reach the index
q "INSERT INTO pv SELECT 9000 + n, a, a::vector, a::halfvec, NULL, NULL FROM qv; DELETE FROM pv WHERE id % 7 = 0; VACUUM pv;" >/dev/null
same "after inserts, deletes and VACUUM" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY v <-> qv.a::vector LIMIT 10) t), ' ' ORDER BY n) FROM qv;" \
	"SELECT string_agg((SELECT string_agg(id::text, ',') FROM (SELECT id FROM pv ORDER BY r <-> qv.a LIMIT 10) t), ' ' ORDER BY n) FROM qv;"
r=$(q "SELECT count(*) FROM (SELECT amvalidate(c.oid) ok FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
       WHERE amname IN ('gpuivf', 'gpusparse') AND opcname ~ '^(vector|halfvec|sparsevec)_') x WHERE ok;")
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: $2, expected $3"; fi; }
check_eq "the seven operator classes validate" "$r" 7
echo "pgvector companion: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
