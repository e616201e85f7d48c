"""The exact GPU reference without a database next to bench_sparse.run: reads the
collection, queries and top 10 that `GI_BENCH_SPARSE_DUMP=DIR bench_sparse.run ...`
wrote (CSR arrays) and times PyTorch's sparse product on the same data through
bench/sparse/torch_ref.py (cuSPARSE SpMM block by block, top-k merged, CUDA events),
reporting how many of its top-10 scores reach the k-th score the CUDA kind returned.

    python3 test/gpu/bench_sparse_torch.py DIR [--batches 128,500] [--repeats 3]
"""
import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "sparse"))
import torch_ref  # noqa: E402

DIM = 30522


def csr(d, name, rows_hint=None):
    ptr = np.fromfile(d / f"{name}.indptr", dtype=np.int64)
    idx = np.fromfile(d / f"{name}.indices", dtype=np.int32)
    val = np.fromfile(d / f"{name}.data", dtype=np.float32)
    return SimpleNamespace(indptr=ptr, indices=idx, data=val, shape=(len(ptr) - 1, DIM))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--batches", default="128,500")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    d = Path(a.dir)
    docs = csr(d, "docs")
    q = csr(d, "queries")
    kth = np.fromfile(d / "topk.scores", dtype=np.float32).reshape(-1, 10)[:, 9]
    print(f"bench_sparse_torch: {docs.shape[0]} documents, {len(docs.data)} non-zeros, "
          f"{q.shape[0]} queries; {torch_ref.available()[1]}")
    rows, why = torch_ref.run([(0, docs)], q, DIM, [int(b) for b in a.batches.split(",")],
                              a.repeats, kth=kth)
    for r in rows:
        qps = r.get("batch_qps", r.get("qps"))
        print(f"torch sparse {r['setting']}: {qps:.0f} q/s (CUDA events), {r['wall_qps']:.0f} "
              f"wall; top-10 scores reaching the CUDA kind's 10th: {r['recall']:.4f}; "
              f"load {r['load_s']:.1f} s")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
