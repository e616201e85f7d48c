"""Faiss GPU IVF-Flat from the faiss-gpu wheel, with the command line and CSV of
faiss_gpu_bench's sweep mode (bench/gibench/faissref.py: FaissGpuCli), so that it runs in
an interpreter of its own: the faiss-gpu wheel's faiss module replaces faiss-cpu's, whose
CPU indexes (vectorised per CPU) the Faiss CPU references of the main process keep.

    python3 wheel_sweep.py sweep --base B.npy --queries Q.npy --gt GT.npy --lists L
        --probes 1,2,.. --batch 1,NQ --metric l2|ip|cosine [--repeats R]
        [--train-per-list 50] [--seed 1] [--csv OUT.csv] [--device gpu|cpu]

Build: train on a seeded sample of 50 rows a list (the Faiss CPU reference's sample) +
add, both on the GPU.  Each (probes, batch): one warm-up call, then R passes over all
queries in calls of `batch`; q/s from the median pass, p50 over every call, recall@10 of
the first pass against GT.  --device cpu (IndexIVFFlat) exists for checks of this
program on a machine without a GPU."""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gibench.faissref import _prep, _train_sample  # noqa: E402

import faiss  # noqa: E402


def ints(s):
    return [int(v) for v in s.split(",") if v]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["sweep"])
    for a in ("--base", "--queries", "--gt"):
        ap.add_argument(a, required=True)
    ap.add_argument("--lists", type=int, required=True)
    ap.add_argument("--probes", type=ints, required=True)
    ap.add_argument("--batch", type=ints, default=[1])
    ap.add_argument("--metric", choices=["l2", "ip", "cosine"], default="l2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--train-per-list", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    o = ap.parse_args()

    xb = _prep(np.load(o.base), o.metric)
    xq = _prep(np.load(o.queries), o.metric)
    gt = np.load(o.gt)
    n, d, nq = len(xb), xb.shape[1], len(xq)
    if xq.shape[1] != d or len(gt) != nq or gt.ndim != 2 or gt.shape[1] < 10:
        raise SystemExit("want base and queries of one dimension and >= 10 ground-truth "
                         "ids a query")
    mt = faiss.METRIC_L2 if o.metric == "l2" else faiss.METRIC_INNER_PRODUCT
    print(f"sweep: {o.base} ({n} x {d}), {nq} queries, metric {o.metric}, {o.lists} lists; "
          f"faiss {faiss.__version__}, {o.device}, GPUs {faiss.get_num_gpus()}", flush=True)
    if o.device == "gpu":
        res = faiss.StandardGpuResources()
        index = faiss.GpuIndexIVFFlat(res, d, o.lists, mt)
    else:
        quant = faiss.IndexFlatL2(d) if mt == faiss.METRIC_L2 else faiss.IndexFlatIP(d)
        index = faiss.IndexIVFFlat(quant, d, o.lists, mt)
    index.cp.seed = o.seed
    sample = _train_sample(xb, o.lists, o.seed, o.train_per_list)
    t0 = time.perf_counter()
    index.train(sample)
    t1 = time.perf_counter()
    index.add(xb)
    t2 = time.perf_counter()
    build_s = t2 - t0
    print(f"build: {build_s:.3f} s (train {t1 - t0:.3f} s on {len(sample)} rows; add "
          f"{t2 - t1:.3f} s)", flush=True)

    out = open(o.csv, "w") if o.csv else None
    if out:
        out.write("system,dataset_n,dim,lists,probes,batch,recall10,qps,p50_ms,build_s\n")
    for p in o.probes:
        if p > o.lists:
            continue
        index.nprobe = p
        for b0 in o.batch:
            b = min(max(b0, 1), nq)
            index.search(xq[:b], 10)                    # warm-up
            calls, passes, rec = [], [], 0.0
            for r in range(o.repeats):
                ids = np.empty((nq, 10), dtype=np.int64)
                p0 = time.perf_counter()
                for s in range(0, nq, b):
                    c0 = time.perf_counter()
                    ids[s:s + b] = index.search(xq[s:s + b], 10)[1]
                    calls.append(time.perf_counter() - c0)
                passes.append(time.perf_counter() - p0)
                if r == 0:
                    rec = np.mean([len(set(a) & set(g[:10])) / 10 for a, g in zip(ids, gt)])
            qps = nq / float(np.median(passes))
            p50 = float(np.median(calls)) * 1e3
            print(f"| sweep | n {n}, d {d}, lists {o.lists} | probes {p:3d}, batch {b:5d} | "
                  f"recall@10 {rec:.4f} | {qps:10.1f} q/s | p50 {p50:.3f} ms |", flush=True)
            if out:
                out.write(f"faiss-gpu-wheel,{n},{d},{o.lists},{p},{b},{rec:.4f},{qps:.1f},"
                          f"{p50:.4f},{build_s:.3f}\n")
                out.flush()
    if out:
        out.close()
    print("done")


if __name__ == "__main__":
    main()
