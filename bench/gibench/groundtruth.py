"""Exact k-NN by brute force: float32 candidate search in blocks (numpy; or PyTorch on the
GPU when BENCH_GT_DEVICE=cuda and one is usable), then an exact float64 re-rank of the
candidates (numpy), so near-ties are settled at full precision."""
import os

import numpy as np

METRICS = ("l2", "ip", "cosine")


def _normalize(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1
    return x / n


def _scores(q, xb, metric):
    """Smaller is closer (distance as pgvector orders it)."""
    if metric == "l2":
        return (q * q).sum(1)[:, None] - 2 * q @ xb.T + (xb * xb).sum(1)[None, :]
    return -(q @ xb.T)  # ip (negative inner product); cosine on normalized vectors


def exact_knn(base, queries, k=100, metric="l2", ids=None, block=65536, extra=32):
    """Ids (nq, k) of the exact nearest neighbours of each query in base.

    ids maps base rows to returned ids (default: row numbers)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric}")
    base = np.asarray(base, dtype=np.float32)
    queries = np.asarray(queries, dtype=np.float32)
    if metric == "cosine":
        base, queries = _normalize(base), _normalize(queries)
    n = len(base)
    kk = min(n, k + extra)
    best_i = _candidates_torch(base, queries, kk, metric) \
        if os.environ.get("BENCH_GT_DEVICE") == "cuda" else None
    if best_i is None:
        best_i = _candidates_numpy(base, queries, kk, metric, block)
    # exact re-rank in float64
    out = np.empty((len(queries), min(k, n)), dtype=np.int64)
    for i, q in enumerate(queries.astype(np.float64)):
        cand = best_i[i]
        xc = base[cand].astype(np.float64)
        if metric == "l2":
            dd = ((xc - q) ** 2).sum(1)
        else:
            dd = -(xc @ q)
        order = np.lexsort((cand, dd))[:out.shape[1]]
        out[i] = cand[order]
    return out if ids is None else np.asarray(ids)[out]


def _candidates_torch(base, queries, kk, metric, block=131072):
    """The kk float32-nearest rows of each query on the GPU (PyTorch), or None when no
    usable GPU / PyTorch (the caller then uses numpy)."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        torch.backends.cuda.matmul.allow_tf32 = False
        dev = torch.device("cuda")
        q = torch.from_numpy(np.array(queries, dtype=np.float32)).to(dev)
        qn = (q * q).sum(1, keepdim=True)
        best_d = torch.empty((len(queries), 0), device=dev)
        best_i = torch.empty((len(queries), 0), dtype=torch.int64, device=dev)
        for start in range(0, len(base), block):
            xb = torch.from_numpy(np.array(base[start:start + block], dtype=np.float32)).to(dev)
            if metric == "l2":
                d = qn - 2 * (q @ xb.T) + (xb * xb).sum(1)[None, :]
            else:
                d = -(q @ xb.T)
            take = min(kk, d.shape[1])
            vals, idx = torch.topk(d, take, dim=1, largest=False)
            best_d = torch.cat([best_d, vals], 1)
            best_i = torch.cat([best_i, idx + start], 1)
            if best_d.shape[1] > kk:
                best_d, keep = torch.topk(best_d, kk, dim=1, largest=False)
                best_i = torch.gather(best_i, 1, keep)
        out = best_i.cpu().numpy()
        del q, qn, best_d, best_i
        torch.cuda.empty_cache()
        return out
    except Exception as e:  # no torch, no GPU, out of memory: numpy does it
        print(f"bench: ground truth on the GPU failed ({type(e).__name__}: {e}); numpy",
              flush=True)
        return None


def _candidates_numpy(base, queries, kk, metric, block):
    n = len(base)
    best_d = np.full((len(queries), 0), np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, n, block):
        xb = base[start:start + block]
        d = _scores(queries, xb, metric).astype(np.float32)
        take = min(kk, d.shape[1])
        part = np.argpartition(d, take - 1, axis=1)[:, :take]
        best_d = np.concatenate([best_d, np.take_along_axis(d, part, 1)], axis=1)
        best_i = np.concatenate([best_i, part + start], axis=1)
        if best_d.shape[1] > kk:
            keep = np.argpartition(best_d, kk - 1, axis=1)[:, :kk]
            best_d = np.take_along_axis(best_d, keep, 1)
            best_i = np.take_along_axis(best_i, keep, 1)
    return best_i
