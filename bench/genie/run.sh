#!/bin/bash
# The genie benchmark in one command (not a test: nothing here runs in CI):
#
#   bash bench/genie/run.sh [--device host|cuda] [run.py options]
#   bash bench/genie/run.sh --help
#
# Prepares like bench/run.sh, each step skipped when already done: the virtual environment
# (bench/setup/python.sh) plus bench/requirements-genie.txt (rapidfuzz: the exact
# edit-distance ground truth), gpuindex (make && make install; BENCH_SKIP_INSTALL=1 keeps
# what is installed). PostgreSQL's contrib modules pg_trgm, fuzzystrmatch and intarray
# must be installed beside it. Then bench/genie/run.py builds or finds the strings under
# bench/.cache/data/ (the Debian text of bench/sparse/corpus_debian.py), starts its own
# cluster (non-root $PG_USER, port 54397, /tmp/gpuindex-bench-genie), measures every engine,
# stops the cluster and writes docs/benchmarks/genie-{seq,sets,lsh}-DATA-DEVICE.{csv,md,png}
# (--scenario lsh: vectors from bench/gibench/datasets.py, cached with exact ground truth).
# BENCH_PYTHON=PATH uses that interpreter as it is (a GPU host: numpy, scipy, matplotlib,
# psycopg on PYTHONPATH; nothing installed; the strings folder
# bench/.cache/data/genie-seq-debian-N carried from a machine that built it, since the
# GPU host has neither the Debian text nor rapidfuzz).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(dirname "$here")
if [ -z "${PG_CONFIG:-}" ]; then
	PG_CONFIG=pg_config
	command -v pg_config >/dev/null || PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
fi
export PG_CONFIG

py=$(bash "$bench/setup/python.sh")
if [ -z "${BENCH_PYTHON:-}" ]; then
	stamp=$(dirname "$(dirname "$py")")/.installed-genie
	want=$(md5sum <"$bench/requirements-genie.txt")
	if ! grep -qxF -- "$want" "$stamp" 2>/dev/null; then
		echo "bench: installing bench/requirements-genie.txt into $(dirname "$(dirname "$py")")" >&2
		# shellcheck disable=SC2086
		"$py" -m pip install -q ${BENCH_PIP_ARGS:-} -r "$bench/requirements-genie.txt" >&2
		echo "$want" >"$stamp"
	fi
fi
case " $* " in *" --help "* | *" -h "*) exec "$py" "$here/run.py" --help ;; esac

ext=$("$PG_CONFIG" --sharedir)/extension
for m in pg_trgm fuzzystrmatch intarray; do
	[ -f "$ext/$m.control" ] || echo "bench: $m is not installed in $ext (intarray is optional)" >&2
done
bash "$bench/setup/gpuindex.sh"
exec "$py" "$here/run.py" "$@"
