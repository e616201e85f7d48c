"""`splade-synth-N`: a synthetic SPLADE-like collection at any scale (MS MARCO's is
8.8M documents: `splade-synth-8.8m`), vectorised numpy, a fixed seed.

* vocabulary of 30,522 terms (BERT's WordPiece size); term popularity Zipf-like,
  p(rank r) ~ 1 / (r + 10), ranks mapped to term ids by a seeded permutation;
* each document draws m_d terms with replacement, m_d = m * X, X lognormal (sigma 0.3),
  m calibrated so that the mean number of distinct terms is ~120 (queries: ~30);
  duplicates collapse into one non-zero;
* weights gamma(shape 2, scale 0.5) rounded to float4: positive, mean 1.

Documents are made in chunks of 50,000; chunk c draws from its own generator seeded with
(seed, c), so the collection does not depend on the number of worker processes. Parts
are written as scipy CSR .npz under bench/.cache/data/splade-synth-N/parts/, with
queries.npz and stats.json beside them (8.8M documents: about 1.06 billion non-zeros,
8.5 GB of parts; a few minutes on 16 cores).

    python3 bench/sparse/gen_synthetic.py 8.8m [--nq 1000] [--workers 16]
    python3 bench/sparse/gen_synthetic.py 100k --tsv DIR   # + DIR/docs.txt, queries.txt
                                                           #   (id TAB spvec literal) for
                                                           #   bench/sparse/host_quick.sql
"""
import argparse
import json
import os
import re
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtri

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gibench.paths import DATA_CACHE  # noqa: E402

V = 30522
SEED = 7
CHUNK = 50000
DOC_NNZ, QUERY_NNZ = 120, 30
SIGMA = 0.3
# the lognormal spread's quantiles, for the calibration of m
_GRID = np.exp(SIGMA * ndtri((np.arange(100) + 0.5) / 100))


def parse_n(text):
    """'8.8m' -> 8800000, '100k' -> 100000, '5000' -> 5000."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text)
    if not m:
        raise ValueError(f"bad size {text!r} (e.g. 100k, 8.8m)")
    mult = {"": 1, "k": 1000, "m": 1000000}[m.group(2).lower()]
    return int(round(float(m.group(1)) * mult))


def popularity(seed=SEED):
    """(cdf over ranks, rank -> term id permutation)."""
    p = 1.0 / (np.arange(V) + 10.0)
    p /= p.sum()
    perm = np.random.default_rng([seed, 0xC0FFEE]).permutation(V).astype(np.int32)
    return np.cumsum(p), perm, p


def calibrate(target, p):
    """Draws m such that E[distinct terms] over the lognormal spread is ~target."""
    lp = np.log1p(-p)

    def distinct(m):
        return float(np.mean([np.sum(-np.expm1(m * g * lp)) for g in _GRID]))
    lo, hi = float(target) / 2, float(target) * 20
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if distinct(mid) < target else (lo, mid)
    return (lo + hi) / 2


def make(rng, n, m, cdf, perm):
    """CSR (n x V) of n vectors: sorted unique terms per row, gamma weights."""
    draws = np.maximum(1, np.rint(m * rng.lognormal(0.0, SIGMA, n))).astype(np.int64)
    total = int(draws.sum())
    ranks = np.searchsorted(cdf, rng.random(total) * cdf[-1], side="right")
    np.minimum(ranks, V - 1, out=ranks)
    key = np.repeat(np.arange(n, dtype=np.int64), draws) * V + perm[ranks]
    key = np.unique(key)
    rows = key // V
    cols = (key - rows * V).astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    w = rng.gamma(2.0, 0.5, size=len(cols)).astype(np.float32)
    np.maximum(w, np.float32(1e-3), out=w)
    return sp.csr_matrix((w, cols, indptr), shape=(n, V))


_STATE = {}


def _chunk(args):
    directory, c, start, count, seed = args
    cdf, perm, m = _STATE["cdf"], _STATE["perm"], _STATE["m_doc"]
    x = make(np.random.default_rng([seed, 1, c]), count, m, cdf, perm)
    path = Path(directory) / "parts" / f"part-{c:05d}.npz"
    tmp = path.with_suffix(".tmp.npz")
    sp.save_npz(tmp, x, compressed=False)
    os.replace(tmp, path)
    return c, x.nnz


def _init(seed):
    cdf, perm, p = popularity(seed)
    _STATE.update(cdf=cdf, perm=perm, m_doc=calibrate(DOC_NNZ, p))


def name_of(n):
    if n % 1000000 == 0:
        return f"splade-synth-{n // 1000000}m"
    if n % 100000 == 0 and n >= 1000000:
        return f"splade-synth-{n / 1e6:g}m"
    if n % 1000 == 0:
        return f"splade-synth-{n // 1000}k"
    return f"splade-synth-{n}"


def ensure(n, nq=1000, seed=SEED, workers=None, log=print):
    """Generates (or finds) the collection; returns its directory."""
    d = DATA_CACHE / name_of(n)
    st = d / "stats.json"
    if st.exists():
        s = json.loads(st.read_text())
        if s.get("docs") == n and s.get("queries", 0) >= nq and s.get("seed") == seed:
            return d
    (d / "parts").mkdir(parents=True, exist_ok=True)
    for f in (d / "parts").glob("part-*"):
        f.unlink()
    t0 = time.time()
    cdf, perm, p = popularity(seed)
    m_doc, m_q = calibrate(DOC_NNZ, p), calibrate(QUERY_NNZ, p)
    jobs = [(str(d), c, s, min(CHUNK, n - s), seed) for c, s in enumerate(range(0, n, CHUNK))]
    workers = workers or os.cpu_count() or 1
    nnz = 0
    with Pool(min(workers, len(jobs)), initializer=_init, initargs=(seed,)) as pool:
        for i, (c, z) in enumerate(pool.imap_unordered(_chunk, jobs)):
            nnz += z
            if (i + 1) % 20 == 0 or i + 1 == len(jobs):
                log(f"synth: {i + 1}/{len(jobs)} parts, {time.time() - t0:.0f} s")
    q = make(np.random.default_rng([seed, 2]), max(nq, 1000), m_q, cdf, perm)
    sp.save_npz(d / "queries.npz", q, compressed=False)
    stats = {"name": name_of(n), "docs": n, "dim": V, "postings": int(nnz),
             "nnz_per_doc_mean": round(nnz / n, 2), "queries": q.shape[0],
             "nnz_per_query_mean": round(q.nnz / q.shape[0], 2), "parts": len(jobs),
             "chunk": CHUNK, "seed": seed, "draws_per_doc": round(m_doc, 2),
             "draws_per_query": round(m_q, 2),
             "popularity": "p(rank r) ~ 1/(r+10), seeded permutation of term ids",
             "weights": "gamma(2, 0.5), float4", "spread": f"lognormal sigma {SIGMA}",
             "workers": workers, "seconds": round(time.time() - t0, 1),
             "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    st.write_text(json.dumps(stats, indent=1) + "\n")
    log(f"synth: {name_of(n)}: {n} documents, {nnz} postings "
        f"({nnz / n:.1f} a document), queries {q.nnz / q.shape[0]:.1f} terms, "
        f"{time.time() - t0:.0f} s with {workers} workers")
    return d


def parts(directory):
    """The document parts of a generated collection, in order (CSR, rows in id order)."""
    return sorted(Path(directory, "parts").glob("part-*.npz"))


def lit(row):
    """spvec / sparsevec text literal of a 1 x V CSR row (1-based indices)."""
    return "{" + ",".join(f"{i + 1}:{str(np.float32(x))}" for i, x in zip(row.indices, row.data)) + f"}}/{V}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", default="100k", help="documents: 100k, 1m, 8.8m, ...")
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--tsv", metavar="DIR", help="also write DIR/docs.txt and DIR/queries.txt")
    a = ap.parse_args()
    d = ensure(parse_n(a.n), a.nq, a.seed, a.workers)
    print(d)
    if a.tsv:
        out = Path(a.tsv)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "docs.txt", "w") as f:
            base = 0
            for p in parts(d):
                x = sp.load_npz(p)
                for i in range(x.shape[0]):
                    f.write(f"{base + i}\t{lit(x[i])}\n")
                base += x.shape[0]
        q = sp.load_npz(d / "queries.npz")
        with open(out / "queries.txt", "w") as f:
            for i in range(q.shape[0]):
                f.write(f"{i}\t{lit(q[i])}\n")


if __name__ == "__main__":
    main()
