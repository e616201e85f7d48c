#!/bin/bash
# A sliding window over a sparse collection: a window of W documents; each
# step inserts B, deletes the oldest B and runs VACUUM (INDEX_CLEANUP ON).
# The store must always hold exactly the window's postings, its memory and
# the index's pages must stop growing after the first steps (emptied slabs
# and pages are reused), and the index must answer as a sequential scan.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-sparse-window-test}
port=$((${GPUINDEX_TEST_PORT_SPARSE_WINDOW:-54386} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
W=3000
B=400
steps=24
D=2000
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }
# documents lo..hi: up to 40 distinct terms skewed towards low ones, random weights
docs() {
	echo "INSERT INTO s SELECT i, (SELECT spvec(array_agg(t ORDER BY t), array_agg(w ORDER BY t), $D)
	      FROM (SELECT t, random()::real AS w FROM (SELECT DISTINCT (1 + floor($D * random() ^ 3))::int AS t
	            FROM generate_series(1, 40) WHERE i > 0) a) b)
	      FROM generate_series($1, $2) i;"
}
query="(SELECT spvec(array_agg(t ORDER BY t), array_agg(1::real), $D) FROM generate_series(1, 300, 7) t)"

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
q "SELECT setseed(0.3); CREATE TABLE s (id bigint PRIMARY KEY, v spvec($D)); $(docs 1 $W)
   CREATE INDEX s_v_idx ON s USING gpusparse (v);" >/dev/null

sizes=""
bad=0
wrong=0
for step in $(seq 1 $steps); do
	lo=$(( (step - 1) * B + 1 ))
	q "SELECT setseed($step / 100.0); $(docs $((W + lo)) $((W + lo + B - 1)))
	   DELETE FROM s WHERE id < $((lo + B));" >/dev/null
	q "VACUUM (INDEX_CLEANUP ON) s" >/dev/null
	row=$(q "SELECT (SELECT sum(nnz(v)) FROM s) || ' ' || rows || ' ' || slabs_used + slabs_free
	                || ' ' || bytes || ' ' || pg_relation_size('s_v_idx') / 8192
	         FROM gpuindex_stats WHERE index_name = 's_v_idx'" | tail -1)
	set -- $row
	[ "$#" = 5 ] && [ "$1" = "$2" ] || { bad=1; echo "# step $step: postings, store rows: $1 $2"; }
	sizes+="$3 $4 $5"$'\n'
	got=$(q "SET enable_seqscan = off; SELECT string_agg(id::text, ',') FROM (SELECT id FROM s ORDER BY v <#> $query LIMIT 10) x" | tail -1)
	want=$(q "SET enable_indexscan = off; SET enable_bitmapscan = off;
	          SELECT string_agg(id::text, ',') FROM (SELECT id FROM s ORDER BY v <#> $query LIMIT 10) x" | tail -1)
	[ -n "$want" ] && [ "$got" = "$want" ] || { wrong=1; echo "# step $step: index $got, seq scan $want"; }
done
check "store holds exactly the window's postings after every step" 0 "$bad"
check "index answers as a sequential scan at every step" 0 "$wrong"
echo "# slabs/bytes/index pages per step: $(printf '%s' "$sizes" | awk '{printf "%s/%s/%s ", $1, $2, $3}')"
# After the first third of the steps: the pool's bytes no longer change and
# the index's pages stay within 10 % of their smallest count; without reuse
# both would grow by a window's worth every W / B steps.
third=$((steps / 3))
tail_sizes=$(printf '%s' "$sizes" | tail -n $((steps - third)))
check "no store growth under a sliding window (bytes constant)" 1 \
	"$(printf '%s\n' "$tail_sizes" | awk '{print $2}' | sort -u | wc -l)"
check "no index growth under a sliding window (pages within 10 %)" 1 \
	"$(printf '%s\n' "$tail_sizes" | awk 'NR == 1 {lo = $3; hi = $3} {if ($3 < lo) lo = $3; if ($3 > hi) hi = $3} END {print (hi * 100 <= lo * 110) ? 1 : 0}')"

echo "gpusparse sliding window: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
