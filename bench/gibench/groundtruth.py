"""Exact k-NN by brute force (numpy): float32 candidate search in blocks, then an exact
float64 re-rank of the candidates, so near-ties are settled at full precision."""
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
