#!/bin/bash
# The one entry command of gpuindex's benchmarks (issue 5):
#   bash bench/run.sh SCENARIO [options]       SCENARIO: build search stream mutate orient batchcost all
#   bash bench/run.sh --help
# Prepares everything first: the Python environment (bench/.cache/venv), Debian's pgvector
# source package built against $PG_CONFIG, and gpuindex itself (make && make install;
# BENCH_SKIP_INSTALL=1 uses what is installed).  Then starts a private PostgreSQL
# (port 54395, /tmp/gpuindex-bench), runs the scenario and writes docs/benchmarks/.
# On a GPU host: bench/gpu-host.sh OUTDIR does everything (PostgreSQL from carried Debian
# packages, wheels, builds, the scenarios); by hand, source <(bash
# tools/gpu-host/setup-postgres.sh DIR) first, so that PG_CONFIG/PG_BIN/PG_USER point at that
# PostgreSQL, and BENCH_PYTHON=python3 uses the machine's python without a venv.
# Not part of the tests.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export PG_CONFIG=${PG_CONFIG:-pg_config}

embed=
case " $* " in *minilm*) embed=--embed ;; esac
py=$(bash "$here/setup/python.sh" $embed)
case " $* " in *" --help "* | *" -h "*) exec "$py" "$here/bench.py" --help ;; esac

bash "$here/setup/gpuindex.sh"
bash "$here/setup/pgvector.sh" >/dev/null
exec "$py" "$here/bench.py" "$@"
