#!/bin/bash
# Runs the Faiss GPU peer's store benchmark (1M x d128, 1,024 lists, bench_store's data)
# on the GPU host, from the repository root, with the binary that build.sh made here and
# that travelled in .faissgpu/ (carry it):
#   bash bench/faiss-gpu/gpu-run.sh OUTDIR
# Writes OUTDIR/faiss_gpu_env.txt (date, host, nvidia-smi, ldd), faiss_gpu_store.log (the
# table) and faiss_gpu_store.csv.  The whole run is bounded by FAISS_GPU_TIMEOUT (230 s).
set -u
out=${1:?usage: bash bench/faiss-gpu/gpu-run.sh OUTDIR}
bin=${FAISS_GPU_BENCH:-.faissgpu/faiss_gpu_bench}
limit=${FAISS_GPU_TIMEOUT:-230}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
faiss_gpu_env "$bin" "$out/faiss_gpu_env.txt"
if [ ! -x "$bin" ]; then
	echo "no $bin: build it with bench/faiss-gpu/build.sh and carry .faissgpu" | tee "$out/faiss_gpu_store.log"
	exit 2
fi
BENCH_N=${BENCH_N:-1000000} BENCH_LISTS=1024 timeout -k 10 "$limit" "$bin" store "$out" 2>&1 |
	tee "$out/faiss_gpu_store.log"
rc=${PIPESTATUS[0]}
echo "faiss_gpu_bench store: exit $rc" | tee -a "$out/faiss_gpu_store.log"
exit "$rc"
