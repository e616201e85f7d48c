#!/bin/bash
# The scale-out benchmark in one command (not a test: nothing here runs in CI):
#
#   bash bench/scaleout/run.sh [run.py options]
#   bash bench/scaleout/run.sh --help
#
# One gpuivf index spread over two PostgreSQL servers with postgres_fdw against the same
# rows on one server: three private clusters on this machine (a coordinator that also
# holds every row, two shards; non-root $PG_USER, ports 54405-54407, directories under
# /tmp/gpuindex-bench-scaleout). Prepares like bench/run.sh, each step skipped when already
# done: the virtual environment (bench/setup/python.sh; BENCH_PYTHON=PATH uses that
# interpreter as it is), gpuindex (make && make install; BENCH_SKIP_INSTALL=1 keeps what is
# installed). postgres_fdw must be installed beside PostgreSQL (Debian's postgresql-15
# has it). The dataset (a seeded synth-N-D set with its exact top 100) is cached under
# bench/.cache/data/ (BENCH_CACHE moves the cache). Writes
# docs/benchmarks/scaleout-DATASET-DEVICE.{csv,md,png} and ...-model.csv.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(dirname "$here")
if [ -z "${PG_CONFIG:-}" ]; then
	PG_CONFIG=pg_config
	command -v pg_config >/dev/null || PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
fi
export PG_CONFIG

py=$(bash "$bench/setup/python.sh")
case " $* " in *" --help "* | *" -h "*) exec "$py" "$here/run.py" --help ;; esac

ext=$("$PG_CONFIG" --sharedir)/extension
if [ ! -f "$ext/postgres_fdw.control" ]; then
	echo "bench: postgres_fdw is not installed in $ext (Debian: postgresql-15)" >&2
	exit 1
fi
bash "$bench/setup/gpuindex.sh"
exec "$py" "$here/run.py" "$@"
