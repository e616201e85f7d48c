"""Sparse collections for the gpusparse benchmark: loading (bm25-debian, splade-synth-N),
exact ground truth (scipy, float64), score-aware recall, and the byte forms the server
takes (binary COPY rows of spvec / sparsevec, packed queries, text literals)."""
import json
import os
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import corpus_debian
import gen_synthetic

PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
K = 10


class SparseSet:
    """Documents as CSR blocks (row offset, matrix), queries as one CSR."""

    def __init__(self, name, directory, blocks, queries, stats):
        self.name, self.dir, self.queries, self.stats = name, Path(directory), queries, stats
        self.blocks = blocks                      # [(first row id, csr float32)]
        self.n = sum(b.shape[0] for _, b in blocks)
        self.dim = queries.shape[1]
        self.offsets = np.array([o for o, _ in blocks] + [self.n], dtype=np.int64)

    @property
    def postings(self):
        return int(sum(b.nnz for _, b in self.blocks))

    def rows(self, ids):
        """CSR of the given document ids, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(self.blocks) == 1:
            return self.blocks[0][1][ids]
        which = np.searchsorted(self.offsets, ids, side="right") - 1
        parts, order = [], []
        for b in np.unique(which):
            sel = np.flatnonzero(which == b)
            parts.append(self.blocks[b][1][ids[sel] - self.offsets[b]])
            order.append(sel)
        m = sp.vstack(parts).tocsr()
        inv = np.empty(len(ids), dtype=np.int64)
        inv[np.concatenate(order)] = np.arange(len(ids))
        return m[inv]


def load(name, nq=1000, log=print):
    if name == corpus_debian.NAME:
        d = corpus_debian.ensure(nq, log=log)
        docs = sp.load_npz(d / "docs.npz").tocsr()
        blocks = [(0, docs)]
    elif name.startswith("splade-synth-"):
        n = gen_synthetic.parse_n(name[len("splade-synth-"):])
        d = gen_synthetic.ensure(n, nq, log=log)
        blocks, off = [], 0
        for p in gen_synthetic.parts(d):
            x = sp.load_npz(p).tocsr()
            blocks.append((off, x))
            off += x.shape[0]
    else:
        raise SystemExit(f"unknown dataset {name!r} (bm25-debian, splade-synth-N)")
    stats = json.loads((d / "stats.json").read_text())
    q = sp.load_npz(d / "queries.npz").tocsr()[:nq]
    for _, b in blocks:
        b.sort_indices()
    q.sort_indices()
    return SparseSet(name, d, blocks, q, stats)


# ------------------------------------------------------------------ ground truth

def _topk_block(args):
    """Exact top-k (float64 scores) of every query within one block."""
    q, block, offset, k = args
    bt = block.astype(np.float64).T.tocsr()
    ids = np.zeros((q.shape[0], k), dtype=np.int64)
    sc = np.full((q.shape[0], k), -np.inf)
    for s in range(0, q.shape[0], 200):
        dense = (q[s:s + 200] @ bt).toarray()
        kk = min(k, dense.shape[1])
        part = np.argpartition(-dense, kk - 1, axis=1)[:, :kk]
        ids[s:s + 200, :kk] = part + offset
        sc[s:s + 200, :kk] = np.take_along_axis(dense, part, axis=1)
    return ids, sc


def ground_truth(ds, k=K, workers=None, log=print):
    """(ids, scores) of the exact top-k per query, best first; cached beside the data."""
    nq = ds.queries.shape[0]
    path = ds.dir / f"gt-{nq}-k{k}.npz"
    if path.exists():
        z = np.load(path)
        return z["ids"], z["scores"]
    t0 = time.time()
    q = ds.queries.astype(np.float64)
    jobs = [(q, b, o, k) for o, b in ds.blocks]
    if len(jobs) > 1:
        with Pool(min(workers or os.cpu_count() or 1, len(jobs))) as pool:
            res = pool.map(_topk_block, jobs)
    else:
        res = [_topk_block(jobs[0])]
    ids = np.concatenate([r[0] for r in res], axis=1)
    sc = np.concatenate([r[1] for r in res], axis=1)
    # best first; among equal scores the smaller id first (deterministic)
    order = np.lexsort((ids, -sc), axis=1)[:, :k]
    ids, sc = np.take_along_axis(ids, order, 1), np.take_along_axis(sc, order, 1)
    np.savez(path, ids=ids, scores=sc)
    log(f"bench: exact top-{k} of {nq} queries (scipy, float64) in {time.time() - t0:.1f} s")
    return ids, sc


class Judge:
    """Score-aware recall@k: a returned id counts when its exact score reaches the
    reference's k-th score (within float tolerance), so ties at the cut-off are not
    misses. A query is exact when all k of its ids count."""

    def __init__(self, ds, gt_scores, k=K):
        self.ds, self.k = ds, k
        self.kth = gt_scores[:, k - 1]
        self.q64 = ds.queries.astype(np.float64)

    def true_scores(self, qi, ids):
        if len(ids) == 0:
            return np.zeros(0)
        r = self.ds.rows(ids).astype(np.float64)
        return np.asarray(r @ self.q64[qi].T.toarray()).ravel()

    def judge(self, found, qidx=None, returned_scores=None):
        """found: per query a sequence of ids (best first). Returns (recall, exact share,
        score mismatches): mismatches count returned scores (when given) that differ from
        the exact ones by more than the tolerance."""
        qidx = range(len(found)) if qidx is None else qidx
        hits = exact = mism = 0
        for j, (qi, f) in enumerate(zip(qidx, found)):
            f = list(dict.fromkeys(int(x) for x in list(f)[:self.k]))
            s = self.true_scores(qi, f)
            thr = self.kth[qi]
            tol = 1e-5 * max(1.0, abs(thr))
            h = int(np.sum(s >= thr - tol))
            hits += min(h, self.k)
            exact += h >= self.k
            if returned_scores is not None:
                rs = np.asarray(returned_scores[j][:len(f)], dtype=np.float64)
                mism += int(np.sum(np.abs(rs - s) > 1e-5 * np.maximum(1.0, np.abs(s))))
        n = len(found)
        return hits / (self.k * n), exact / n, mism


# ------------------------------------------------------------------ bytes for the server

def copy_rows(ids, x):
    """Binary COPY tuples (bigint id, spvec / sparsevec) of the CSR rows x: per value
    int32 dim, int32 nnz, int32 0, int32 indices[nnz], float4 values[nnz], big-endian
    (src/types/spvec_io.c, pgvector's sparsevec_recv). Built in 2-byte units: every
    field starts at an even offset."""
    n = x.shape[0]
    ids = np.asarray(ids, dtype=np.int64)
    ptr = x.indptr.astype(np.int64)
    nnz = np.diff(ptr)
    hdr = np.zeros(n, dtype=[("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"),
                             ("dim", ">i4"), ("nnz", ">i4"), ("unused", ">i4")])
    hdr["nf"], hdr["l1"], hdr["id"] = 2, 8, ids
    hdr["l2"], hdr["dim"], hdr["nnz"] = 12 + 8 * nnz, x.shape[1], nnz
    h16 = hdr.view(np.uint16).reshape(n, 15)
    total = 15 * n + 4 * int(ptr[-1])                 # in uint16 units
    out = np.empty(total, dtype=np.uint16)
    start = 15 * np.arange(n, dtype=np.int64) + 4 * ptr[:-1]
    out[(start[:, None] + np.arange(15)).ravel()] = h16.ravel()
    if ptr[-1]:
        row = np.repeat(np.arange(n, dtype=np.int64), nnz)
        j = np.arange(ptr[-1], dtype=np.int64)
        base_i = 15 * row + 2 * ptr[row] + 15 + 2 * j          # indices: start + 15 + 2 l
        base_v = 15 * row + 2 * ptr[row + 1] + 15 + 2 * j      # values after the indices
        iv = x.indices.astype(">i4").view(np.uint16).reshape(-1, 2)
        vv = x.data.astype(">f4").view(np.uint16).reshape(-1, 2)
        out[base_i] = iv[:, 0]
        out[base_i + 1] = iv[:, 1]
        out[base_v] = vv[:, 0]
        out[base_v + 1] = vv[:, 1]
    return out.tobytes()


def copy_into(conn, table, ds, ids=None, chunk=20000):
    """COPY (id, v) rows of the whole set (or of the given ids) into table; seconds."""
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(f"COPY {table} (id, v) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(PGCOPY_HEADER)
            if ids is None:
                for off, b in ds.blocks:
                    for s in range(0, b.shape[0], chunk):
                        x = b[s:s + chunk]
                        cp.write(copy_rows(np.arange(off + s, off + s + x.shape[0]), x))
            else:
                ids = np.sort(np.asarray(ids, dtype=np.int64))
                for s in range(0, len(ids), chunk):
                    cp.write(copy_rows(ids[s:s + chunk], ds.rows(ids[s:s + chunk])))
            cp.write(b"\xff\xff")
    return time.perf_counter() - t0


def literal(row, dim):
    """Text form '{i:v,...}/dim' (1-based) of a 1 x dim CSR row, float4 shortest repr."""
    return "{" + ",".join(f"{i + 1}:{float(np.float32(v))!r}" for i, v in
                          zip(row.indices, row.data)) + f"}}/{dim}"


def literals(q):
    return [literal(q[i], q.shape[1]) for i in range(q.shape[0])]


def packed(q):
    """gpusparse_search_packed's query bytes: per query int32 n, n int32 0-based indices,
    n float4 values, little-endian."""
    out = []
    for i in range(q.shape[0]):
        r = q[i]
        out += [np.int32(r.nnz).tobytes(), r.indices.astype("<i4").tobytes(),
                r.data.astype("<f4").tobytes()]
    return b"".join(out)
