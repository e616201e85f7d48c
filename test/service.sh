#!/bin/bash
# Device service tests that need a live server under the test's control:
# the error without preload, batching across sessions, cancel and
# statement_timeout while waiting, and survival of the service being
# terminated or killed.  Prints "N passed, N failed"; exits non-zero on
# any failure.  Usage: test/service.sh [scratch dir] (extension installed)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-/tmp/gpuindex-service-test}
port=${GPUINDEX_TEST_PORT:-54391}
rm -rf "$dir"
trap 'cluster_stop "$dir"' EXIT
q() { cluster_psql "$dir" $port -Atc "$1" 2>&1; }

# ---- without shared_preload_libraries: a clear error, no crash ----------
cluster_start "$dir" $port || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
out=$(q "SELECT gpuindex_ping()")
case "$out" in
	*"not loaded through shared_preload_libraries"*) pass "no preload: clear error" ;;
	*) fail "no preload: clear error (got: $out)" ;;
esac
check "no preload: operators still work" "5" "$(q "SELECT '{0,0}'::real[] <-> '{3,4}'")"
cluster_stop "$dir"
rm -rf "$dir"

# ---- preloaded ------------------------------------------------------------
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
q "CREATE EXTENSION gpuindex" >/dev/null
check "ping" "" "$(q "SELECT gpuindex_ping()")"
backend=$(q "SELECT backend FROM gpuindex_service()")
echo "# service: $(q "SELECT backend || ' on ' || device FROM gpuindex_service()")"
grep -h "gpuindex device service:" "$dir/server.log" | sed 's/^/# log: /'
if [ "$GPUINDEX_TEST_DEVICE" = auto ]; then
	case "$backend" in cpu|cuda) pass "service backend chosen by auto ($backend)" ;;
		*) fail "service backend chosen by auto (got $backend)" ;; esac
else
	check "service backend is the configured device" "$GPUINDEX_TEST_DEVICE" "$backend"
fi
check "service not bound to a database" "t" \
	"$(q "SELECT datid IS NULL FROM pg_stat_activity WHERE backend_type = 'gpuindex device service'")"

# round-trip cost, for the record (not asserted: machines differ)
echo "# round trip, back to back: $(q "SELECT round(gpuindex_ping_bench(20000)::numeric, 2)") us"
echo "# round trip, lone request: $(q "SELECT round(gpuindex_ping_bench(500, 2000)::numeric, 2)") us"

# batching: many sessions at once; the service lingers 2 ms per round so
# that concurrent requests meet in one round even on a loaded 2-core box
q "ALTER SYSTEM SET gpuindex.batch_linger_us = 2000" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
before=$(q "SELECT requests || ' ' || rounds FROM gpuindex_service()")
echo "SELECT gpuindex_ping();" >"$dir/ping.sql"
chmod 644 "$dir/ping.sql"
as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 8 -j 4 -T 3 -f '$dir/ping.sql' postgres" >"$dir/pgbench.log" 2>&1
after=$(q "SELECT requests || ' ' || rounds FROM gpuindex_service()")
mean=$(python3 -c "
b=list(map(int,'$before'.split())); a=list(map(int,'$after'.split()))
print('%.2f' % ((a[0]-b[0])/max(1,a[1]-b[1])))")
echo "# mean batch of 8 concurrent sessions: $mean requests per round"
check "8 sessions batch (mean batch > 1)" "1" "$(python3 -c "print(int($mean > 1.0))")"
grep -q "number of failed transactions: 0" "$dir/pgbench.log" && pass "pgbench pings without errors" ||
	{ fail "pgbench pings without errors"; cat "$dir/pgbench.log"; }

# statement_timeout and cancel while waiting: the service lingers 100 ms
q "ALTER SYSTEM SET gpuindex.batch_linger_us = 100000" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
out=$(cluster_psql "$dir" $port -Atc "SET statement_timeout = '20ms'" -c "SELECT gpuindex_ping()" 2>&1)
case "$out" in
	*"statement timeout"*) pass "statement_timeout interrupts a wait" ;;
	*) fail "statement_timeout interrupts a wait (got: $out)" ;;
esac
# the same session's slot is reusable at once after an abandoned request
out=$(cluster_psql "$dir" $port -Atc "SET statement_timeout = '20ms'" \
	-c "DO \$\$ BEGIN PERFORM gpuindex_ping(); EXCEPTION WHEN query_canceled THEN NULL; END \$\$" \
	-c "RESET statement_timeout" -c "SELECT gpuindex_ping_bench(3) > 0" 2>&1)
check "slot reusable after an abandoned request" "t" "$out"
# pg_cancel_backend from another session
(cluster_psql "$dir" $port -Atc "SELECT gpuindex_ping_bench(100)" >"$dir/cancel.out" 2>&1) &
sleep 1
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT gpuindex_ping_bench(100)%' AND pid <> pg_backend_pid()" >/dev/null
wait
grep -q "canceling statement due to user request" "$dir/cancel.out" && pass "query cancel interrupts a wait" ||
	fail "query cancel interrupts a wait ($(cat "$dir/cancel.out"))"
q "ALTER SYSTEM RESET gpuindex.batch_linger_us" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5

# pg_terminate_backend of the service while sessions keep calling it:
# the postmaster restarts it and callers resubmit transparently
gen0=$(q "SELECT generation FROM gpuindex_service()")
pid0=$(q "SELECT pid FROM gpuindex_service()")
as_pg "pgbench -n -h '$dir' -p $port -U postgres -c 4 -j 2 -T 5 -f '$dir/ping.sql' postgres" >"$dir/pgbench2.log" 2>&1 &
sleep 1
check "terminate the service" "t" "$(q "SELECT pg_terminate_backend($pid0)")"
wait
grep -q "number of failed transactions: 0" "$dir/pgbench2.log" && pass "no client error across a service restart" ||
	{ fail "no client error across a service restart"; tail -5 "$dir/pgbench2.log"; }
gen1=$(q "SELECT generation FROM gpuindex_service()")
pid1=$(q "SELECT pid FROM gpuindex_service()")
check "service restarted (new generation)" "1" "$(( gen1 > gen0 ))"
check "service restarted (new pid)" "1" "$(( pid1 != pid0 ))"

# SIGKILL of the service: the postmaster resets the whole cluster; the
# next connection works
kill -9 "$pid1"
ok=0
for i in $(seq 1 60); do
	sleep 0.5
	if [ "$(q "SELECT 1 FROM gpuindex_service()" 2>/dev/null)" = 1 ]; then ok=1; break; fi
done
check "service answers after SIGKILL and crash restart" "1" "$ok"
grep -q "terminated by signal 9" "$dir/server.log" && pass "postmaster saw the kill" || fail "postmaster saw the kill"

echo "service: $TESTS_PASSED passed, $TESTS_FAILED failed"
[ "$TESTS_FAILED" = 0 ]
