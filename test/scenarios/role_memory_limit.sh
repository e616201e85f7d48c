#!/bin/bash
# One role cannot take the stores' memory from the others: with
# gpuindex.role_memory_limit, the stores of the indexes a role owns share
# that much (within gpuindex.memory_limit); a role's index that would pass
# it is built with a NOTICE naming the limit and searched in parts within
# what is left of the role's share, and another role's indexes and inserts
# still work.  Two ordinary login roles, temp tables (no other privilege).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-role-limit-test}
port=$((${GPUINDEX_TEST_PORT_ROLE_LIMIT:-54388} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }
as() { local who=$1; shift; cluster_psql "$dir" $port -U "$who" -Atc "$1" 2>&1; }

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.memory_limit = 64MB" \
	"gpuindex.role_memory_limit = 16MB" || exit 1
q "CREATE EXTENSION gpuindex; CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;" >/dev/null
# a temp table of 30,000 rows x 32 dimensions and its index (a store of about 6.4 MB)
mk() {
	echo "SELECT setseed(0.$2); CREATE TEMP TABLE $1 (id int, v real[]);
	  INSERT INTO $1 SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 32) WHERE i > 0)
	  FROM generate_series(1, 30000) i;
	  CREATE INDEX ON $1 USING gpuivf (v real_l2_ops) WITH (lists = 16);
	  SELECT 'built' FROM pg_class WHERE relname = '${1}_v_idx';"
}
owned() { q "SELECT coalesce(sum(bytes), 0) FROM gpuindex_stats s JOIN pg_class c ON c.oid = s.indexrelid
             WHERE c.relowner = '$1'::regrole" | tail -1; }

# alice (one session, statements one by one: temp tables live with it)
# builds three indexes (two fit her 16 MB), searches the third (in parts),
# then holds her session open while we look
alice_out=$dir/alice.out
{ mk a1 1; mk a2 2; mk a3 3
  echo "SET enable_seqscan = off;
	SELECT 'a3 answers ' || count(*) FROM (SELECT id FROM a3 ORDER BY v <-> (SELECT v FROM a3 WHERE id = 7) LIMIT 5) s;
	SELECT 'holding'; SELECT pg_sleep(8);"; } |
	cluster_psql "$dir" $port -U alice -At -v ON_ERROR_STOP=0 -f - >"$alice_out" 2>&1 &
apid=$!
for i in $(seq 1 600); do grep -q '^holding$' "$alice_out" 2>/dev/null && break; sleep 0.1; done
out=$(cat "$alice_out")
echo "# alice: $(echo "$out" | grep -v '^$' | tr '\n' ' ' | cut -c1-300)"
check "alice's three indexes are built" 3 "$(echo "$out" | grep -c '^built$')"
check "alice's third index does not fit: a NOTICE names the per-role limit" 1 \
	"$(echo "$out" | grep -c 'would pass gpuindex.role_memory_limit')"
check "alice's third index answers searches, in parts within her share" "a3 answers 5" \
	"$(echo "$out" | grep '^a3 answers')"
a=$(owned alice)
echo "# bytes of alice's stores while she holds them: $a"
check "alice's stores together stay under her limit" 1 "$(( a > 0 && a <= 16 * 1024 * 1024 ))"

# meanwhile bob (another session) builds his and inserts into it
out=$(as bob "$(mk b1 4)
   INSERT INTO b1 SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 32) WHERE i > 0)
   FROM generate_series(30001, 31000) i;
   SET enable_seqscan = off;
   SELECT count(*) FROM (SELECT id FROM b1 ORDER BY v <-> (SELECT v FROM b1 WHERE id = 7) LIMIT 5) s;")
echo "# bob: $(echo "$out" | tr '\n' ' ' | cut -c1-200)"
check "bob's index is built and serves searches while alice is at her limit" "built 5" \
	"$(echo "$out" | grep -E '^(built|5)$' | tr '\n' ' ' | sed 's/ $//')"
wait $apid

echo "role memory limit: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
