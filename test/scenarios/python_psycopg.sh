#!/bin/bash
# The psycopg 3 adapters (python/gpuindex_psycopg.py) from Python against a
# cluster: numpy vectors and batches without casts, sparse vectors both
# ways, checked against numpy brute force (test/python/test_psycopg.py).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

: "${GPUINDEX_TEST_DEVICE:=cpu}"
# the first Python with psycopg and numpy (Debian's, where another comes first in PATH)
py=""
for p in ${GPUINDEX_PYTHON:-} python3 /usr/bin/python3; do
	if "$p" -c "import psycopg, numpy" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
	echo "FAILED - python3-psycopg and python3-numpy are needed (scripts/install-deps.sh)"
	exit 1
fi
dir=${1:-${GPUINDEX_TEST_TMP:-/tmp}/gpuindex-python-test}
port=$((${GPUINDEX_TEST_PORT_PYTHON:-54385} + ${GPUINDEX_TEST_PORT_OFFSET:-0}))
rm -rf "$dir"
cluster_cleanup_on_exit "$dir"
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" \
	"gpuindex.device = $GPUINDEX_TEST_DEVICE" || exit 1
"$py" "$here/python/test_psycopg.py" "host=$dir port=$port user=postgres dbname=postgres"
