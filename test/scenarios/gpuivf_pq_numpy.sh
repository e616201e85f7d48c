#!/bin/bash
# IVF-PQ distances against an independent numpy reference: the codebooks
# and codes read from a pq gpuivf index, the distances recomputed in numpy
# (test/python/test_pq.py) and compared with what the index returns; then
# the same answers after a restart of the device service and of the server
# (the store reloaded from the pages, codebooks included).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
py=""
for p in ${GPUINDEX_PYTHON:-} python3 /usr/bin/python3; do
	if "$p" -c "import psycopg, numpy" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
	echo "FAILED - python3-psycopg and python3-numpy are needed (scripts/install-deps.sh)"
	exit 1
fi
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-pq-test}
port=$((${GPUINDEX_TEST_PORT_PQ:-54387} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
dsn="host=$dir port=$port user=postgres dbname=postgres"
saved=$dir/pq_answers.json
"$py" "$here/python/test_pq.py" "$dsn" "$saved" || exit 1
as_pg "pg_ctl -D '$dir/data' -m fast -w restart -l '$dir/server.log' >/dev/null" || exit 1
"$py" "$here/python/test_pq.py" "$dsn" --after-restart "$saved"
