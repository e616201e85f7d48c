#!/bin/bash
# Builds and installs gpuindex from this checkout against $PG_CONFIG for the benchmarks
# (BENCH_SKIP_INSTALL=1 keeps what is installed; GPUINDEX_MAKE_ARGS as in
# test/gpu/run-gpu.sh, e.g. with_llvm=no without clang-14).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
: "${PG_CONFIG:=pg_config}"
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
[ "${BENCH_SKIP_INSTALL:-0}" = 1 ] && exit 0
echo "bench: building and installing gpuindex" >&2
# shellcheck disable=SC2086
make -s -C "$root" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
sudo_if make -s -C "$root" PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} install >/dev/null
