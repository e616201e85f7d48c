#!/bin/bash
# The gpusparse benchmark from SQL on a GPU host (no PostgreSQL, no psycopg, no network):
#
#   bash bench/sparse/gpu-host.sh OUTDIR [run.py options, e.g. --dataset splade-synth-1000000]
#   BENCH_SUITE=genie bash bench/sparse/gpu-host.sh OUTDIR [bench/genie/run.py options]
#
# Unpacks PostgreSQL 15 from the carried Debian packages (tools/gpu-host/setup-postgres.sh;
# the server runs as a non-root user), installs the carried psycopg wheels into a folder
# on PYTHONPATH (numpy, scipy, matplotlib and torch are the machine's own: the run stops
# with a clear message when one of the first three is missing), then runs
# bench/sparse/run.sh with gpuindex.device = cuda (gpuindex built with nvcc, pgvector from
# the carried Debian source) and copies its results and logs into OUTDIR.
#
# Carried paths (ignored, from the Debian machine): .gpuhost/debs, .benchwheels (psycopg,
# psycopg-binary for CPython 3.12), bench/.cache/src-trixie (pgvector's source), and for
# the Seismic peer .seismic311 (tools/gpu-host/fetch-seismic-python.sh).
# Environment: BENCH_PYTHON [python3], BENCH_PG_PREFIX [/tmp/pg-sparse],
# GPUINDEX_BENCH_DEVICE [cuda], BENCH_SUITE [sparse: bench/SUITE/run.sh, results
# docs/benchmarks/SUITE-*], BENCH_COMMIT (the commit to report, where the copy of
# the checkout on the machine has no current .git).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: bash bench/sparse/gpu-host.sh OUTDIR [run.py options]" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
shift
cd "$root" || exit 1
py=${BENCH_PYTHON:-python3}
prefix=${BENCH_PG_PREFIX:-/tmp/pg-sparse}
site=/tmp/gpuindex-sparse-site
device=${GPUINDEX_BENCH_DEVICE:-cuda}
suite=${BENCH_SUITE:-sparse}
[ -f "$root/bench/$suite/run.sh" ] || { echo "no bench/$suite/run.sh" >&2; exit 2; }
stamp=/tmp/gpuindex-sparse-start
touch "$stamp"

{
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
	echo "CPU: $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M:%S') UTC; commit ${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
} | tee "$out/host.txt"
"$py" -c 'import sys, numpy, scipy, matplotlib; print("python", sys.version.split()[0], "numpy", numpy.__version__, "scipy", scipy.__version__, "matplotlib", matplotlib.__version__)' 2>&1 |
	tee -a "$out/host.txt" | grep -q '^python' ||
	{ echo "FATAL: $py lacks numpy, scipy or matplotlib" | tee -a "$out/host.txt"; exit 1; }

bash "$root/tools/gpu-host/setup-postgres.sh" "$root/.gpuhost/debs" "$prefix" >/tmp/pg-sparse.env || exit 1
. /tmp/pg-sparse.env
export PG_PREFIX PG_BIN PATH LD_LIBRARY_PATH PG_CONFIG PG_USER
chmod -R a+rX "$prefix"
rm -f "$prefix"/usr/lib/postgresql/*/lib/llvmjit*.so
command -v clang-14 >/dev/null || export GPUINDEX_MAKE_ARGS="with_llvm=no ${GPUINDEX_MAKE_ARGS:-}"
command -v clang-14 >/dev/null || export BENCH_PGXS_ARGS="with_llvm=no ${BENCH_PGXS_ARGS:-}"

rm -rf "$site" && mkdir -p "$site"
# each wheel alone: psycopg-binary only where it fits the interpreter (libpq otherwise)
for w in "$root"/.benchwheels/*.whl; do
	"$py" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$w" 2>/dev/null ||
		echo "note: $(basename "$w") does not install here"
done
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
"$py" -c 'import psycopg; print("psycopg", psycopg.__version__, psycopg.pq.__impl__)' 2>&1 | tee -a "$out/host.txt" |
	grep -q '^psycopg' || { echo "FATAL: psycopg does not import" | tee -a "$out/host.txt"; exit 1; }
export BENCH_PYTHON=$py GPUINDEX_BENCH_DEVICE=$device PYTHONUNBUFFERED=1

# Seismic's wheel is for CPython 3.11 only: Debian 12's 3.11 where it was carried
# (tools/gpu-host/fetch-seismic-python.sh .seismic311)
if [ -d "$root/.seismic311" ] && ! "$py" -c 'import seismic' 2>/dev/null; then
	py311=/tmp/gpuindex-py311
	rm -rf "$py311" && mkdir -p "$py311/root" "$py311/site"
	for d in "$root"/.seismic311/*.deb; do dpkg -x "$d" "$py311/root"; done
	tar xJf "$root/.seismic311/site311.tar.xz" -C "$py311/site"
	printf '#!/bin/sh\nexec env PYTHONHOME=%s PYTHONPATH=%s %s "$@"\n' "$py311/root/usr" \
		"$py311/site" "$py311/root/usr/bin/python3.11" >"$py311/python"
	chmod -R a+rX "$py311" && chmod a+x "$py311/python"
	"$py311/python" -c 'import sys, numpy, seismic; print("seismic under python", sys.version.split()[0], "numpy", numpy.__version__)' 2>&1 |
		tee -a "$out/host.txt"
	export BENCH_SEISMIC_PYTHON=$py311/python
fi

bash "$root/bench/$suite/run.sh" --device "$device" "$@" 2>&1 | tee "$out/run.log"
rc=${PIPESTATUS[0]}
# this run's results only (the device tool returns a few files)
find "$root/docs/benchmarks" -maxdepth 1 -name "$suite-*" -newer "$stamp" -exec cp {} "$out/" \;
case $suite in
genie) cluster=${BENCH_GENIE_DIR:-/tmp/gpuindex-bench-genie} ;;
*) cluster=${BENCH_SPARSE_DIR:-/tmp/gpuindex-bench-$suite} ;;
esac
for f in "$cluster/server.log"; do
	[ -f "$f" ] && tail -c 1000000 "$f" >"$out/server.log"
done
echo "run.sh exit $rc" | tee -a "$out/host.txt"
exit "$rc"
