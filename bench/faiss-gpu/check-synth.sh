#!/bin/bash
# CPU-only checks of the Faiss GPU peer, on the build machine (no GPU needed):
#   1. the same data as the store benchmark: bench/store/bench_store.run, run against a
#      do-nothing stand-in for gpuindex_cuda.so (synth_stub.c), prints FNV-1a hashes of the
#      centroids, the 1M vectors and keys, the first 1,000 queries and the 7 delete sets it
#      hands to the backend; `faiss_gpu_bench synth-check` prints the same from synth.h;
#      they must be identical (BENCH_N, BENCH_DIM, BENCH_LISTS as for the benchmarks)
#   2. the .npy reader against numpy, on the SQL benchmark's cached datasets
#      (bench/.cache/data/*/*.npy, or the files given as arguments)
#   3. without a GPU, the store, sweep and pqsweep modes must say so and exit 77, and
#      gpu-pqsweep.sh must hand that on (on the first cached dataset with a base.npy)
# Run from anywhere: bash bench/faiss-gpu/check-synth.sh [FILE.npy...]
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${FAISS_GPU_BENCH:-$here/.faissgpu/faiss_gpu_bench}
v=$here/bench/.cache/faiss-verify
py=${BENCH_PYTHON:-$here/bench/.cache/venv/bin/python}
mkdir -p "$v"
fail=0

gcc -std=gnu99 -O2 -Wall -Wextra -Werror -fPIC -shared -I "$here/src/backend" -I "$here/src/backend/host" -I "$here/cuda/common" \
	-o "$v/synth_stub.so" "$here/bench/faiss-gpu/synth_stub.c"
make -s -C "$here/bench/store" bench_store.run
"$here/bench/store/bench_store.run" "$v/synth_stub.so" | grep '^synth:' >"$v/bench_store.synth"
"$bin" synth-check >"$v/faiss_gpu_bench.synth"
if [ -s "$v/bench_store.synth" ] && cmp -s "$v/bench_store.synth" "$v/faiss_gpu_bench.synth"; then
	echo "ok: synth data identical ($(wc -l <"$v/bench_store.synth") hashes: centroids, vectors+keys, queries, 7 delete sets)"
	sed 's/^/    /' "$v/bench_store.synth"
else
	echo "FAIL: synth data differ"; diff "$v/bench_store.synth" "$v/faiss_gpu_bench.synth" || true
	fail=1
fi

files=("$@")
[ ${#files[@]} -gt 0 ] || files=("$here"/bench/.cache/data/*/*.npy)
if [ -e "${files[0]}" ] && "$py" -c 'import numpy' 2>/dev/null; then
	"$bin" npy-check "${files[@]}" >"$v/npy.txt"
	if "$py" - "$v/npy.txt" <<'EOF'
import sys, numpy as np
bad = 0
for line in open(sys.argv[1]):
    path, rest = line.split(": ", 1)
    f = rest.split()
    descr, rows, cols = f[0], int(f[1]), int(f[3])
    s, first, mid, last = float(f[5]), float(f[7]), float(f[9]), float(f[11])
    a = np.load(path, mmap_mode="r")
    flat = np.asarray(a).reshape(-1)
    want = (a.dtype.str, a.shape[0], a.shape[1] if a.ndim == 2 else 1)
    ref = float(flat.astype(np.float64).sum())
    ok = ((descr, rows, cols) == want and abs(s - ref) <= 1e-9 * max(1.0, np.abs(flat).astype(np.float64).sum())
          and all(flat.dtype.type(v) == flat[k] for v, k in ((first, 0), (mid, len(flat) // 2), (last, -1))))
    print(("ok:  " if ok else "FAIL:") + f" npy {path}: {descr} {rows} x {cols}")
    bad += not ok
sys.exit(1 if bad else 0)
EOF
	then :; else fail=1; fi
else
	echo "skip: npy check (no .npy files or no numpy at $py)"
fi

if ! command -v nvidia-smi >/dev/null 2>&1; then
	for mode in store sweep pqsweep; do
		set +e
		msg=$("$bin" $mode 2>&1 >/dev/null)
		rc=$?
		set -e
		if [ $rc = 77 ] && echo "$msg" | grep -q "no CUDA device"; then
			echo "ok: $mode without a GPU: exit 77, \"$msg\""
		else
			echo "FAIL: $mode without a GPU: exit $rc, \"$msg\""; fail=1
		fi
	done
	ds=$(ls -d "$here"/bench/.cache/data/*/base.npy 2>/dev/null | head -1)
	if [ -n "$ds" ]; then
		ds=$(dirname "$ds")
		set +e
		FAISS_GPU_BENCH=$bin bash "$here/bench/faiss-gpu/gpu-pqsweep.sh" "$ds" "$v/pqsweep" --lists 100 >/dev/null 2>&1
		rc=$?
		set -e
		if [ $rc = 77 ] && grep -q "no CUDA device" "$v/pqsweep/faiss_gpu_pqsweep.log"; then
			echo "ok: gpu-pqsweep.sh on $(basename "$ds") without a GPU: exit 77, log in $v/pqsweep"
		else
			echo "FAIL: gpu-pqsweep.sh on $(basename "$ds") without a GPU: exit $rc"; fail=1
		fi
	fi
fi
exit $fail
