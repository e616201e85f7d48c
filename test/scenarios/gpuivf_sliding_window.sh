#!/bin/bash
# The SIVF streaming pattern in SQL: a window of W rows; each step inserts
# B rows, deletes the oldest B and runs VACUUM (INDEX_CLEANUP ON) (plain
# VACUUM may skip index cleanup).  Emptied slabs must be reused, so the
# store stops growing after the first steps, and it must always hold
# exactly the window.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-/tmp/gpuindex-window-test}
port=${GPUINDEX_TEST_PORT_WINDOW:-54396}
W=4000
B=500
steps=24
rm -rf "$dir"
trap 'cluster_stop "$dir"' EXIT
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

echo "gpuivf sliding window: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
