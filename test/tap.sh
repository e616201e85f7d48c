#!/bin/bash
# TAP tests with PostgreSQL's own Perl cluster modules (PostgreSQL::Test::Cluster,
# shipped by the server-dev package under pgxs/src/test/perl): crash recovery,
# physical standby, promotion, serializable conflicts, faults in the service.  Needs gpuindex installed into $PG_CONFIG's tree
# and IPC::Run (libipc-run-perl).  Prints prove's summary and the plain
# "N passed, N failed" line.
#   bash test/tap.sh [t/NNN_name.pl ...]   (GPUINDEX_TAP_KEEP=1 keeps the clusters and logs of a passing run)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-tap
perl_lib=$($PG_CONFIG --pkglibdir)/pgxs/src/test/perl
if [ ! -f "$perl_lib/PostgreSQL/Test/Cluster.pm" ]; then
	echo "FAILED - PostgreSQL's TAP modules not found in $perl_lib (postgresql-server-dev-15)"
	echo "0 passed, 1 failed"
	exit 1
fi

rm -rf "$dir"
pg_scratch "$dir"
cp -r "$here/tap/t" "$here/tap/GpuindexTest.pm" "$dir/"
[ "$(id -u)" = 0 ] && chown -R "$PG_USER" "$dir"
tests=${*:-t/*.pl}

as_pg "cd '$dir' && PERL5LIB='$perl_lib:$dir${PERL5LIB:+:$PERL5LIB}' PG_REGRESS=/bin/true \
	GPUINDEX_TEST_DEVICE='$GPUINDEX_TEST_DEVICE' PG_TEST_EXTRA='' \
	prove -v $tests" >"$dir/prove.log" 2>&1
status=$?
grep -E '^(ok|not ok|# )|^t/|Result|Files=' "$dir/prove.log" | grep -v '^# Postmaster PID\|^# Checking port\|^# Found port' | tail -n 80
passed=$(grep -cE '^ *ok [0-9]' "$dir/prove.log")
failed=$(grep -cE '^ *not ok [0-9]' "$dir/prove.log" | head -1)
todo=$(grep -cE '^ *not ok [0-9].*# TODO' "$dir/prove.log")
failed=$((failed - todo))
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
echo "tap: $passed passed, $failed failed"
[ $status = 0 ] && [ -z "${GPUINDEX_TAP_KEEP:-}" ] && scratch_remove "$dir"
exit $status
