#!/bin/bash
# Faults inside the device service restart the service alone, never the
# cluster: a device error (the request gets an ERROR, then the service exits
# cleanly), a crash by signal (as a fault inside CUDA code could be), an
# invalid write on a helper thread of the host backend's pool and, on
# the CUDA backend, a real illegal write by a kernel, all injected by a
# superuser-only test hook.  Sessions carry on: one that
# was connected throughout keeps its connection, and searches after each
# fault reload the index and answer as before.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-fault-test}
port=$((${GPUINDEX_TEST_PORT_FAULT:-54399} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" "gpuindex.host_threads = 2" || exit 1
q "CREATE EXTENSION gpuindex;
   CREATE FUNCTION gpuindex_debug_fault(text) RETURNS void
	 AS 'gpuindex', 'gpuindex_debug_fault' LANGUAGE C STRICT;
   SELECT setseed(0.3);
   CREATE TABLE t (id int PRIMARY KEY, v real[]);
   INSERT INTO t SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(1, 3000) i;
   CREATE INDEX t_v ON t USING gpuivf (v) WITH (lists = 10);" >/dev/null

top10="SELECT string_agg(id::text, ',') FROM
	(SELECT id FROM t ORDER BY v <-> '{0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5}' LIMIT 10) s"
# through the index (all lists probed: exact)
answers() { q "SET enable_seqscan = off; SET gpuivf.probes = 10; $top10"; }
seq_answers() { q "SET enable_indexscan = off; SET enable_bitmapscan = off; $top10"; }
service_pid() { q "SELECT pid FROM gpuindex_service()"; }
# the service's pid once a new one runs (the old one gone)
new_service() {
	local old=$1 p
	for i in $(seq 1 100); do
		p=$(service_pid)
		[ -n "$p" ] && [ "$p" != "$old" ] && [ "$p" != 0 ] && { echo "$p"; return 0; }
		sleep 0.1
	done
	echo "none"
}

check "the searches go through the index" 1 \
	"$(q "SET enable_seqscan = off; EXPLAIN $top10" | grep -c 'Index Scan using t_v')"
a0=$(answers)
check "answers before any fault = sequential scan" "$(seq_answers)" "$a0"

# a session connected throughout: a cluster restart would cut it
cluster_psql "$dir" $port -Atc "SELECT pg_sleep(8)" -c "SELECT 'still connected'" >"$dir/long.out" 2>&1 &
long=$!
sleep 0.5

p0=$(service_pid)
out=$(q "SELECT gpuindex_debug_fault('device')")
case $out in *"injected device fault"*) pass "a device fault answers the request with an ERROR" ;;
	*) fail "a device fault answers the request with an ERROR (got '$out')" ;; esac
p1=$(new_service "$p0")
[ "$p1" != none ] && pass "the service restarted after the device fault" ||
	fail "the service restarted after the device fault"
check "answers after the device fault (index reloaded)" "$a0" "$(answers)"

q "SELECT gpuindex_debug_fault('signal')" >/dev/null
p2=$(new_service "$p1")
[ "$p2" != none ] && pass "the service restarted after a crash by signal" ||
	fail "the service restarted after a crash by signal"
check "answers after the crash (index reloaded)" "$a0" "$(answers)"

q "SELECT gpuindex_debug_fault('thread')" >/dev/null
p2t=$(new_service "$p2")
[ "$p2t" != none ] && pass "the service restarted after a fault on a helper thread" ||
	fail "the service restarted after a fault on a helper thread"
check "answers after the helper thread's fault (index reloaded)" "$a0" "$(answers)"
p2=$p2t

# a real fault inside CUDA code (a kernel's illegal write: the context is
# lost for good) on the CUDA backend; elsewhere a clear refusal
restarts=3
if [ "$GPUINDEX_TEST_DEVICE" = cuda ]; then
	out=$(q "SELECT gpuindex_debug_fault('cuda')")
	case $out in *"illegal memory access"*) pass "a CUDA fault answers the request with the backend's ERROR" ;;
		*) fail "a CUDA fault answers the request with the backend's ERROR (got '$out')" ;; esac
	p3=$(new_service "$p2")
	[ "$p3" != none ] && pass "the service restarted after the CUDA fault" ||
		fail "the service restarted after the CUDA fault"
	check "answers after the CUDA fault (new context, index reloaded)" "$a0" "$(answers)"
	restarts=4
else
	check "a CUDA fault needs the CUDA backend" \
		"ERROR:  the injected CUDA fault needs the CUDA backend (gpuindex.device = cuda)" \
		"$(q "SELECT gpuindex_debug_fault('cuda')" | head -1)"
fi

wait $long
check "a session connected throughout kept its connection" "still connected" "$(tail -1 "$dir/long.out")"
check "the cluster was never reset" 0 \
	"$(grep -c 'terminating any other active server processes' "$dir/server.log")"
check "the server log says why the service restarted" $restarts \
	"$(grep -c 'restarting the service' "$dir/server.log")"
check "the unknown fault is refused" "ERROR:  unknown fault \"nope\"" \
	"$(q "SELECT gpuindex_debug_fault('nope')" | head -1)"

# A VACUUM cancelled while the service drops its rows' keys: the pages lost
# those rows already, so the store must lose them too, before the heap can
# reuse their TIDs.  First with one request of keys out (fewer than 2,048
# dead rows), then with a request out and the next one filled (about 6,000).
store_rows() { q "SELECT rows FROM gpuindex_store_stats() WHERE index_name = 't_v'"; }
cancelled_vacuum() {
	q "SELECT gpuindex_debug_fault('stall')" >/dev/null &
	local stall=$!
	sleep 0.5
	out=$(cluster_psql "$dir" $port -At -c "SET statement_timeout = '500ms'" \
		-c "VACUUM (INDEX_CLEANUP ON) t" 2>&1)
	wait $stall
	echo "$out" | grep ERROR
}
answers >/dev/null
q "DELETE FROM t WHERE id % 6 = 0" >/dev/null
check "a VACUUM waiting for a stalled service is cancelled" \
	"ERROR:  canceling statement due to statement timeout" "$(cancelled_vacuum)"
check "the cancelled VACUUM's rows still left the store" \
	"$(q "SELECT count(*) FROM t")" "$(store_rows)"
q "INSERT INTO t SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(20001, 29000) i" >/dev/null
q "DELETE FROM t WHERE id % 2 = 0" >/dev/null
check "a VACUUM of 6,000 dead rows waiting for a stalled service is cancelled" \
	"ERROR:  canceling statement due to statement timeout" "$(cancelled_vacuum)"
q "VACUUM (INDEX_CLEANUP ON) t" >/dev/null
check "... and after the next VACUUM the store holds exactly the live rows" \
	"$(q "SELECT count(*) FROM t")" "$(store_rows)"
q "INSERT INTO t SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 8) WHERE i > 0)
   FROM generate_series(30001, 36000) i" >/dev/null
check "rows in the dead rows' places: index = sequential scan" "$(seq_answers)" "$(answers)"
check "... and the store holds every row" "$(q "SELECT count(*) FROM t")" "$(store_rows)"
check "... that is, $(q "SELECT count(*) FROM t WHERE id > 30000") new rows" 6000 \
	"$(q "SELECT count(*) FROM t WHERE id > 30000")"

echo "service fault: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
