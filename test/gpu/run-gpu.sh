#!/bin/bash
# The GPU host runner: on a machine with a GPU but no PostgreSQL (see
# docs/gpu-tests.md), unpack Debian 12's PostgreSQL 15 from packages
# fetched beforehand on a Debian machine, build and install gpuindex into
# it, and run the whole suite (unit tests, pg_regress, service scripts)
# with gpuindex.device = $GPUINDEX_TEST_DEVICE (default cuda).
#
# Prepare on the Debian machine (into the ignored .gpuhost/ folder):
#   ../shared/gpu-host/fetch-postgres-debs.sh .gpuhost/debs
#   (cd .gpuhost && mkdir -p cmocka && cd cmocka && apt-get download libcmocka0 libcmocka-dev)
#   (cd .gpuhost && mkdir -p perl && cd perl && apt-get download libipc-run-perl)
#   (cd .gpuhost && mkdir -p python && cd python &&
#    apt-get download python3-psycopg)
# Then on the GPU host, from the repository root:
#   bash test/gpu/run-gpu.sh [.gpuhost]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${1:-$top/.gpuhost}
prefix=${GPUINDEX_PG_PREFIX:-/tmp/pg}

eval "$(bash "$top/tools/gpu-host/setup-postgres.sh" "$cache/debs" "$prefix")"
if [ -d "$cache/cmocka" ]; then
	mkdir -p /tmp/cmocka
	for f in "$cache"/cmocka/*.deb; do dpkg -x "$f" /tmp/cmocka; done
	export CMOCKA_PREFIX=/tmp/cmocka
fi
# IPC::Run for the TAP tests (Debian's pure-Perl package, fetched into $cache/perl)
if [ -d "$cache/perl" ]; then
	mkdir -p /tmp/perl5
	for f in "$cache"/perl/*.deb; do dpkg -x "$f" /tmp/perl5; done
	chmod -R a+rX /tmp/perl5
	export PERL5LIB=/tmp/perl5/usr/share/perl5${PERL5LIB:+:$PERL5LIB}
fi
# psycopg 3 for the Python adapters' test (Debian's pure-Python package; the
# host's python3 brings numpy and typing_extensions)
if [ -d "$cache/python" ]; then
	mkdir -p /tmp/pypkgs
	for f in "$cache"/python/*.deb; do dpkg -x "$f" /tmp/pypkgs; done
	export PYTHONPATH=/tmp/pypkgs/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
fi
# the server user must be able to read the installed tree
chmod -R a+rX "$prefix"
# Debian's server ships the LLVM JIT provider, but the GPU host has no
# libLLVM-14: any query costly enough to JIT (enable_seqscan = off does
# that) failed with "could not load library llvmjit.so".  Without the
# provider file PostgreSQL disables JIT quietly.
rm -f "$prefix"/usr/lib/postgresql/*/lib/llvmjit*.so

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
nvcc --version | tail -2

export GPUINDEX_TEST_DEVICE=${GPUINDEX_TEST_DEVICE:-cuda}
export GPUINDEX_SKIP_DEPS=1
# Debian's PGXS wants clang-14 for JIT bitcode; the GPU host has none
command -v clang-14 >/dev/null || export GPUINDEX_MAKE_ARGS="with_llvm=no ${GPUINDEX_MAKE_ARGS:-}"

bash "$top/test/run-all.sh"
suite=$?

# the CUDA backend's own tests: differential vs the host backend, and
# compute-sanitizer memcheck / racecheck (docs/gpu-tests.md)
cuda=0
if [ "$GPUINDEX_TEST_DEVICE" = cuda ] && [ -f "$top/gpuindex_cuda.so" ] &&
	[ -z "${GPUINDEX_SKIP_CUDA_TESTS:-}" ]; then
	bash "$here/cuda-tests.sh" "$top/gpuindex_cuda.so" "${GPUINDEX_CUDA_TEST_LOGS:-/tmp/gpuindex-cuda-tests}"
	cuda=$?
fi
[ $suite = 0 ] && [ $cuda = 0 ]
