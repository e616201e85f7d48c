#!/bin/bash
# The SIVF streaming pattern in SQL: a window of W rows; each step inserts
# B rows, deletes the oldest B and runs VACUUM (INDEX_CLEANUP ON) (plain
# VACUUM may skip index cleanup).  Emptied slabs must be reused, so the
# store stops growing after the first steps, and it must always hold
# exactly the window; index pages emptied in one list must serve the others.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-window-test}
port=$((${GPUINDEX_TEST_PORT_WINDOW:-54396} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
W=4000
B=500
steps=24
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
q "SELECT setseed(0.3);
   CREATE TABLE w (id bigint PRIMARY KEY, v real[]);
   INSERT INTO w SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 32) WHERE i > 0)
   FROM generate_series(1, $W) i;
   CREATE INDEX w_v_idx ON w USING gpuivf (v real_l2_ops) WITH (lists = 8);" >/dev/null

sizes=""
bad=0
for step in $(seq 1 $steps); do
	lo=$(( (step - 1) * B + 1 ))
	q "SELECT setseed($step / 100.0);
	   INSERT INTO w SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 32) WHERE i > 0)
	   FROM generate_series($((W + lo)), $((W + lo + B - 1))) i;
	   DELETE FROM w WHERE id < $((lo + B));" >/dev/null
	q "VACUUM (INDEX_CLEANUP ON) w" >/dev/null
	row=$(q "SET enable_seqscan = off; SELECT count(*) FROM (SELECT id FROM w ORDER BY v <-> ARRAY(SELECT 0.5::real FROM generate_series(1, 32)) LIMIT 10) s;
	         SELECT rows || ' ' || slabs_used + slabs_free || ' ' || bytes FROM gpuindex_stats WHERE index_name = 'w_v_idx'" | tail -1)
	set -- $row
	[ "$1" = "$W" ] || bad=1
	sizes+="$2 $3"$'\n'
done
check "store holds exactly the window after every step" 0 "$bad"
echo "# slabs and bytes per step: $(printf '%s' "$sizes" | awk '{printf "%s/%s ", $1, $2}')"
# After the first third of the steps the pool's bytes no longer change and
# the slab count moves by at most a slab per list (occupancy of a list
# varies with the data); without reuse it would grow by B/32 every step.
third=$((steps / 3))
check "no growth under a sliding window (bytes constant)" 1 \
	"$(printf '%s' "$sizes" | tail -n $((steps - third)) | awk '{print $2}' | sort -u | wc -l)"
spread=$(printf '%s' "$sizes" | tail -n $((steps - third)) | awk 'NR == 1 {lo = $1; hi = $1} {if ($1 < lo) lo = $1; if ($1 > hi) hi = $1} END {print hi - lo}')
check "no growth under a sliding window (slabs within one per list)" 1 "$(( spread <= 8 ))"

# Rows moving between lists: two far-apart clusters, one list each; the
# window holds only cluster A's rows after phase 1, only B's after phase 2,
# A's again after phase 3.  Without recycling empty pages each list would
# keep the pages of a whole window (the index doubles); with it, the pages
# A's rows left serve B and back, and every phase ends at about the first's
# size.  Each phase's searches are checked against a sequential scan.
q "SELECT setseed(0.7);
   CREATE TABLE m (id bigint PRIMARY KEY, v real[]);
   INSERT INTO m SELECT i, ARRAY(SELECT (CASE WHEN i % 2 = 0 THEN 100 ELSE -100 END + random())::real
                                 FROM generate_series(1, 32) WHERE i > 0)
   FROM generate_series(1, $W) i;
   CREATE INDEX m_v_idx ON m USING gpuivf (v real_l2_ops) WITH (lists = 2);" >/dev/null
next=$((W + 1))
pages=()
wrong=0
for phase in 1 2 3; do
	c=$([ $phase = 2 ] && echo 100 || echo -100)
	for step in $(seq 1 $((W / B))); do
		q "INSERT INTO m SELECT i, ARRAY(SELECT ($c + random())::real FROM generate_series(1, 32) WHERE i > 0)
		   FROM generate_series($next, $((next + B - 1))) i;
		   DELETE FROM m WHERE id IN (SELECT id FROM m ORDER BY id LIMIT $B);" >/dev/null
		next=$((next + B))
		q "VACUUM (INDEX_CLEANUP ON) m" >/dev/null
	done
	pages+=("$(q "SELECT pg_relation_size('m_v_idx') / 8192")")
	# the window's 10 nearest to a point of the cluster it holds, by index and by seq scan
	got=$(q "SET enable_seqscan = off; SET gpuivf.probes = 2;
	         SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM m ORDER BY v <-> ARRAY(SELECT $c::real FROM generate_series(1, 32)) LIMIT 10) s" | tail -1)
	want=$(q "SET enable_indexscan = off; SET enable_bitmapscan = off;
	          SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM m ORDER BY v <-> ARRAY(SELECT $c::real FROM generate_series(1, 32)) LIMIT 10) s" | tail -1)
	[ -n "$want" ] && [ "$got" = "$want" ] || { wrong=1; echo "# phase $phase: index $got, seq scan $want"; }
done
echo "# index pages after each phase: ${pages[*]} (rows move between lists)"
check "index answers as a sequential scan while rows move between lists" 0 "$wrong"
check "emptied pages serve other lists (phases 2 and 3 within 15 % of phase 1)" 1 \
	"$(( pages[1] * 100 <= pages[0] * 115 && pages[2] * 100 <= pages[0] * 115 ))"

echo "gpuivf sliding window: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
