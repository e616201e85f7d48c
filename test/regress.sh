#!/bin/bash
# Run the pg_regress suite (sql/*.sql against expected/*.out) on a
# temporary instance with gpuindex preloaded.  GPUINDEX_TEST_DEVICE picks
# the compute backend (cpu by default; the GPU runner passes cuda), so the
# identical suite checks both; GPUINDEX_TEST_DEVICES sets gpuindex.devices
# (every store spread over that many devices; default 0: the backend's)
# and GPUINDEX_TEST_OVERLAP gpuindex.service_overlap (default on: every
# search's answer waits in flight for the service's next round, also on
# the host backend).
# Usage: test/regress.sh [scratch dir]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-regress}
rm -rf "$dir"
pg_scratch "$dir"
# the server user may not be able to read the checkout (e.g. under /root)
cp -r "$top/sql" "$top/expected" "$dir/"
cat >"$dir/extra.conf" <<CONF
shared_preload_libraries = 'gpuindex'
gpuindex.device = $GPUINDEX_TEST_DEVICE
gpuindex.devices = ${GPUINDEX_TEST_DEVICES:-0}
gpuindex.service_overlap = ${GPUINDEX_TEST_OVERLAP:-on}
max_connections = 30
fsync = off
${GPUINDEX_TEST_CONF:-}
CONF
chmod -R a+rX "$dir"
[ "$(id -u)" = 0 ] && chown -R "$PG_USER" "$dir"

# GPUINDEX_REGRESS_TESTS="genie gpusparse" runs only those
tests=${GPUINDEX_REGRESS_TESTS:-$(cd "$top/sql" && ls *.sql | sed 's/\.sql$//' | sort | tr '\n' ' ')}
regress=$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress
as_pg "cd '$dir' && '$regress' --bindir='$PG_BIN' --temp-instance='$dir/instance' \
	--temp-config='$dir/extra.conf' --inputdir='$dir' --outputdir='$dir' \
	--port=$((${GPUINDEX_TEST_PORT:-54392} + ${GPUINDEX_TEST_PORT_OFFSET:-0})) $tests"
rc=$?
if [ $rc != 0 ] && [ -f "$dir/regression.diffs" ]; then
	echo "---- regression.diffs (first 200 lines) ----"
	head -200 "$dir/regression.diffs"
fi
[ $rc = 0 ] && scratch_remove "$dir"
exit $rc
