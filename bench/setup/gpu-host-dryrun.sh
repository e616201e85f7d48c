#!/bin/bash
# Dry run of bench/gpu-host.sh on the Debian machine (no GPU): copies the working tree as
# the device tool sends it (tracked + untracked-not-ignored files) plus the carried paths
# into a scratch folder, and runs gpu-host.sh there with gpuindex.device = cpu and the tiny
# plan (20K rows, 3 stream steps), PostgreSQL from the carried .debs as the non-root user,
# the wheels into a target folder, pgvector from the carried source.
#
#   DRY_PYTHON=/path/to/python3.12 bash bench/setup/gpu-host-dryrun.sh [SCRATCH]
#
# DRY_PYTHON must be a CPython 3.12 (the wheels are cp312) with numpy, matplotlib and
# typing_extensions, like the GPU host's; e.g. `python3.12 -m venv /tmp/py312 &&
# /tmp/py312/bin/pip install numpy matplotlib typing_extensions`.
# DRY_FAISSGPU: stub (default: a stand-in for .faissgpu/faiss_gpu_bench made of faiss-cpu,
# to exercise the merge of its rows), real (the carried .faissgpu: fails without a GPU,
# which must be reported and survived), none.  DRY_PLAN (tiny), DRY_BUDGET (900),
# DRY_CARRY (extra carried paths, e.g. bench/.cache/data/minilm-20k), DRY_WHEELS
# (.benchwheels .benchwheels-faiss), DRY_ARGS / DRY_MARGIN (BENCH_GPU_ARGS /
# BENCH_GPU_DEADLINE_MARGIN: e.g. "--seconds 20" and -300 force a step past its limit).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
d=${1:-/tmp/gpuindex-gpu-dryrun}
py=${DRY_PYTHON:?set DRY_PYTHON to a CPython 3.12 with numpy and matplotlib}
rm -rf "$d/main" "$d/out" "$d/work"
mkdir -p "$d/main" "$d/out"
cd "$src" || exit 1
git ls-files -co --exclude-standard -z | xargs -0 -I{} cp --parents {} "$d/main/"
for c in .gpuhost/debs ${DRY_WHEELS:-.benchwheels .benchwheels-faiss} bench/.cache/src-trixie ${DRY_CARRY:-}; do
	[ -e "$c" ] || { echo "missing carried path $c"; continue; }
	mkdir -p "$d/main/$(dirname "$c")"
	cp -a "$c" "$d/main/$c"
done
force=1
case ${DRY_FAISSGPU:-stub} in
real) cp -a .faissgpu "$d/main/.faissgpu" ;;
none) force=0 ;;
*)
	mkdir -p "$d/main/.faissgpu"
	cat >"$d/main/.faissgpu/faiss_gpu_bench" <<EOF
#!$py
"""Dry-run stand-in for faiss_gpu_bench's sweep mode (its CLI and CSV), on faiss-cpu."""
import sys, time
import numpy as np
import faiss
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
assert sys.argv[1] == "sweep", sys.argv
xb = np.load(a["--base"]).astype(np.float32); xq = np.load(a["--queries"]); g = np.load(a["--gt"])
assert g.shape[0] == xq.shape[0] and xq.dtype == np.float32, (g.shape, xq.shape)
metric, lists, reps = a.get("--metric", "l2"), int(a["--lists"]), int(a.get("--repeats", 5))
if metric == "cosine":
    xb /= np.linalg.norm(xb, axis=1, keepdims=True); xq = xq / np.linalg.norm(xq, axis=1, keepdims=True)
mt = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
t0 = time.time()
quant = faiss.IndexFlatL2(xb.shape[1]) if metric == "l2" else faiss.IndexFlatIP(xb.shape[1])
idx = faiss.IndexIVFFlat(quant, xb.shape[1], lists, mt)
idx.train(xb[:50 * lists]); idx.add(xb); build = time.time() - t0
with open(a["--csv"], "w") as f:
    f.write("system,dataset_n,dim,lists,probes,batch,recall10,qps,p50_ms,build_s\n")
    for p in [int(v) for v in a["--probes"].split(",") if int(v) <= lists]:
        idx.nprobe = p
        for b0 in [int(v) for v in a["--batch"].split(",")]:
            b = min(max(b0, 1), len(xq)); passes, calls = [], []
            for r in range(reps):
                p0 = time.perf_counter(); labs = []
                for s in range(0, len(xq), b):
                    c0 = time.perf_counter(); labs.append(idx.search(xq[s:s + b], 10)[1])
                    calls.append(time.perf_counter() - c0)
                passes.append(time.perf_counter() - p0)
            lab = np.concatenate(labs)
            rec = np.mean([len(set(lab[i]) & set(g[i, :10])) / 10 for i in range(len(xq))])
            f.write(f"stub,{len(xb)},{xb.shape[1]},{lists},{p},{b},{rec:.4f},"
                    f"{len(xq) / np.median(passes):.1f},{np.median(calls) * 1e3:.4f},{build:.3f}\n")
print("done (stand-in)")
EOF
	chmod +x "$d/main/.faissgpu/faiss_gpu_bench"
	;;
esac
echo "tree as it would travel: $(du -sb "$d/main" | cut -f1) bytes (limit $((64 * 1024 * 1024)))"
cd "$d/main" || exit 1
env GPUINDEX_BENCH_DEVICE=cpu BENCH_GPU_PLAN="${DRY_PLAN:-tiny}" BENCH_PYTHON="$py" \
	BENCH_FAISS_GPU_FORCE=$force BENCH_GPU_ARGS="${DRY_ARGS:-}" \
	BENCH_GPU_DEADLINE_MARGIN="${DRY_MARGIN:-}" BENCH_PORT="${DRY_PORT:-54495}" \
	BENCH_PG_PREFIX="$d/pg" BENCH_WORK="$d/work" BENCH_GPU_BUDGET="${DRY_BUDGET:-900}" \
	bash bench/gpu-host.sh "$d/out"
rc=$?
echo "gpu-host.sh exit $rc; OUTDIR:"
ls -l "$d/out"
exit $rc
