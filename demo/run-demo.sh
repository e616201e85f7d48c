#!/bin/bash
# gpuindex demo, from a fresh Debian 12 machine (root or sudo):
#   installs dependencies, builds and installs gpuindex, starts a local
#   PostgreSQL 15 with gpuindex preloaded (left running afterwards), loads
#   100,000 clustered 128-d vectors, builds a gpuivf index, and prints
#   recall@10 and latency against exact search.
# Environment: DEMO_ROWS (100000), DEMO_DIR (/tmp/gpuindex-demo),
# DEMO_PORT (54390), GPUINDEX_SKIP_DEPS=1 to skip apt-get.
# bash demo/run-demo.sh --stop stops the server and removes its directory.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ "${GPUINDEX_SKIP_DEPS:-0}" = 1 ] || bash scripts/install-deps.sh
. test/lib.sh

rows=${DEMO_ROWS:-100000}
dir=${DEMO_DIR:-/tmp/gpuindex-demo}
port=${DEMO_PORT:-54390}
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${1:-}" = --stop ]; then
	cluster_stop "$dir"
	scratch_remove "$dir"
	echo "demo server stopped, $dir removed"
	exit 0
fi

echo "== building and installing gpuindex"
make -s -j2 >/dev/null
sudo_if make -s install >/dev/null

echo "== starting PostgreSQL in $dir (port $port)"
if [ -f "$dir/data/postmaster.pid" ]; then cluster_stop "$dir"; fi
rm -rf "$dir"
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" "max_connections = 20"

cp "$top/demo/demo.sql" "$dir/demo.sql"
chmod a+r "$dir/demo.sql"
cluster_psql "$dir" $port -v rows="$rows" -f "$dir/demo.sql"

echo
echo "The server keeps running. Connect with:"
echo "  psql -h $dir -p $port -U postgres -d postgres"
echo "Stop it (and remove $dir) with:"
echo "  bash demo/run-demo.sh --stop"
