#!/bin/bash
# The gpusparse benchmark in one command (not a test: nothing here runs in CI):
#
#   bash bench/sparse/run.sh --dataset bm25-debian [run.py options]
#   bash bench/sparse/run.sh --help
#
# Prepares like bench/run.sh, each step skipped when already done: the virtual environment
# (bench/setup/python.sh) plus bench/requirements-sparse.txt (scipy, pyseismic-lsr),
# pgvector 0.8.0 from Debian's trixie source package (bench/setup/pgvector.sh: sparsevec),
# gpuindex (make && make install; BENCH_SKIP_INSTALL=1 keeps what is installed). Then
# bench/sparse/run.py builds or finds the collection under bench/.cache/data/, starts its
# own cluster (non-root $PG_USER, port 54396, /tmp/gpuindex-bench-sparse), measures every
# engine, stops the cluster and writes docs/benchmarks/sparse-DATASET.{csv,md,png}.
# BENCH_PYTHON=PATH uses that interpreter as it is (a GPU host: numpy, scipy, torch,
# psycopg on PYTHONPATH; nothing installed).
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
	stamp=$(dirname "$(dirname "$py")")/.installed-sparse
	want=$(md5sum <"$bench/requirements-sparse.txt")
	if ! grep -qxF -- "$want" "$stamp" 2>/dev/null; then
		echo "bench: installing bench/requirements-sparse.txt into $(dirname "$(dirname "$py")")" >&2
		# shellcheck disable=SC2086
		"$py" -m pip install -q ${BENCH_PIP_ARGS:-} -r "$bench/requirements-sparse.txt" >&2
		echo "$want" >"$stamp"
	fi
fi
case " $* " in *" --help "* | *" -h "*) exec "$py" "$here/run.py" --help ;; esac

bash "$bench/setup/gpuindex.sh"
bash "$bench/setup/pgvector.sh" >/dev/null
exec "$py" "$here/run.py" "$@"
