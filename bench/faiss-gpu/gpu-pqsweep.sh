#!/bin/bash
# Runs the Faiss GPU peer's pqsweep mode (GpuIndexIVFPQ) on one of the SQL benchmark's
# cached datasets on the GPU host, from the repository root, with the binary that
# build.sh made here and that travelled in .faissgpu/ (carry it):
#   bash bench/faiss-gpu/gpu-pqsweep.sh DATADIR OUTDIR [pqsweep options...]
#   e.g. bash bench/faiss-gpu/gpu-pqsweep.sh bench/.cache/data/synth-450k-128 $OUT/faiss \
#            --lists 700 --m 64 --probes 1,2,4,8,16,32,64 --batch 1,1000,10000
# DATADIR holds base.npy, queries.npy and one ground truth: gt-l2.npy, else gt-cosine.npy,
# else gt-ip.npy (FAISS_GPU_GT=FILE picks another).  The options go to the program as
# given (--lists is required there).  Writes OUTDIR/faiss_gpu_pqsweep_env.txt (date,
# host, nvidia-smi, ldd), faiss_gpu_pqsweep.log (setup line, build, table),
# faiss_gpu_pqsweep.csv and faiss_gpu_pqsweep.csv.setup.txt.  The whole run is bounded
# by FAISS_GPU_TIMEOUT (570 s).
set -eu
data=${1:?usage: bash bench/faiss-gpu/gpu-pqsweep.sh DATADIR OUTDIR [pqsweep options...]}
out=${2:?usage: bash bench/faiss-gpu/gpu-pqsweep.sh DATADIR OUTDIR [pqsweep options...]}
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${FAISS_GPU_BENCH:-$root/.faissgpu/faiss_gpu_bench}
limit=${FAISS_GPU_TIMEOUT:-570}
log=$out/faiss_gpu_pqsweep.log
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
faiss_gpu_env "$bin" "$out/faiss_gpu_pqsweep_env.txt" || true
gt=${FAISS_GPU_GT:-}
if [ -z "$gt" ]; then
	for m in l2 cosine ip; do
		[ -f "$data/gt-$m.npy" ] && { gt=$data/gt-$m.npy; break; }
	done
fi
if [ ! -x "$bin" ]; then
	echo "no $bin: build it with bench/faiss-gpu/build.sh and carry .faissgpu" | tee "$log"
	exit 2
fi
if [ ! -f "$data/base.npy" ] || [ ! -f "$data/queries.npy" ] || [ ! -f "$gt" ]; then
	echo "$data: want base.npy, queries.npy and gt-{l2,cosine,ip}.npy" | tee "$log"
	exit 2
fi
set +e
timeout -k 10 "$limit" "$bin" pqsweep --base "$data/base.npy" --queries "$data/queries.npy" --gt "$gt" \
	--csv "$out/faiss_gpu_pqsweep.csv" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "faiss_gpu_bench pqsweep: exit $rc" | tee -a "$log"
exit "$rc"
