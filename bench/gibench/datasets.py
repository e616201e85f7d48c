"""Datasets: a seeded clustered-Gaussian generator, vector files, and the real-text
embedding set.  Every dataset is materialised once under bench/.cache/data/NAME/
(base.npy, queries.npy, gt-METRIC.npy with the exact top-100), then reused.

Names (the --dataset option):
  synth-N-D[-SEED]        clustered Gaussian, N base rows, D dims (e.g. synth-500k-128)
  files:BASE,QUERIES[,GT] vector files (.fvecs/.bvecs/.npy; GT .ivecs/.npy), e.g. SIFT1M
  minilm[-N]              Python's own docstrings embedded with all-MiniLM-L6-v2 (384-d)
  sift-images[-N]         real 128-d SIFT descriptors of scikit-image's photographs (OpenCV)
"""
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import groundtruth, vecio
from .paths import DATA_CACHE

GT_K = 100


@dataclass
class Dataset:
    name: str
    base: np.ndarray
    queries: np.ndarray
    metric: str
    gt: np.ndarray  # (nq, GT_K) row numbers of base
    info: dict
    folder: Path = None  # the cache folder: base.npy, queries.npy, gt-METRIC.npy

    @property
    def dim(self):
        return self.base.shape[1]


def _count(s):
    s = s.lower()
    mult = {"k": 1000, "m": 1000000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "km" else s) * mult)


def clustered_gaussian(n, d, seed=1, clusters=None, rank=None, nq=1000, center_scale=0.5):
    """Seeded mixture of anisotropic Gaussians: each cluster has a centre and its own
    random low-rank subspace (rank r) plus a little isotropic noise, so the data has a
    low intrinsic dimension like real descriptors/embeddings rather than the worst case
    of i.i.d. noise.  Queries are fresh draws from the same mixture."""
    rng = np.random.default_rng(seed)
    clusters = clusters or max(16, min(1024, int(np.sqrt(n) / 2)))
    r = rank or min(d, max(8, d // 8))
    centers = rng.normal(0.0, center_scale, (clusters, d)).astype(np.float32)
    bases = (rng.normal(0.0, 1.0, (clusters, r, d)) / np.sqrt(r)).astype(np.float32)
    # clusters overlap (within-cluster spread larger than the centre spacing); chosen so
    # that at 100K x 128 Faiss IVF (316 lists, 32 probes) reaches recall@10 ~0.99 and
    # HNSW (m 16, ef 80) ~0.99, near what SIFT gives
    spread, noise = 1.0, 0.15

    def draw(count, g):
        out = np.empty((count, d), dtype=np.float32)
        # chunks of 65,536 rows (the sets generated so far), fewer where a chunk's
        # cluster bases would pass 1 GiB (high dimensions: 960-d has rank 120)
        step = int(min(65536, max(1024, (1 << 30) // (r * d * 4))))
        for s in range(0, count, step):
            m = min(step, count - s)
            c = g.integers(0, clusters, m)
            z = g.normal(0.0, spread, (m, r)).astype(np.float32)
            out[s:s + m] = centers[c] + np.einsum("mr,mrd->md", z, bases[c]) \
                + g.normal(0.0, noise, (m, d)).astype(np.float32)
        return out

    base = draw(n, np.random.default_rng(seed * 1000 + 1))
    queries = draw(nq, np.random.default_rng(seed * 1000 + 2))
    info = {"kind": "clustered Gaussian", "clusters": clusters, "rank": r,
            "center_scale": center_scale,
            "spread": spread, "noise": noise, "seed": seed}
    return base, queries, info


def _materialise(name, make):
    """Builds (base, queries, metric, info) once and caches it as .npy."""
    folder = DATA_CACHE / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    meta = folder / "meta.json"
    if not meta.exists():
        t0 = time.time()
        base, queries, metric, info = make()
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "base.npy", np.ascontiguousarray(base, dtype=np.float32))
        np.save(folder / "queries.npy", np.ascontiguousarray(queries, dtype=np.float32))
        info = dict(info, metric=metric, seconds_to_make=round(time.time() - t0, 1))
        meta.write_text(json.dumps(info, indent=1))
    info = json.loads(meta.read_text())
    base = np.load(folder / "base.npy", mmap_mode="r")
    queries = np.load(folder / "queries.npy")
    return folder, np.asarray(base), queries, info["metric"], info


def ground_truth(folder, base, queries, metric, given=None):
    path = Path(folder) / f"gt-{metric}.npy"
    if not path.exists():
        if given is not None:
            gt = np.asarray(given)[:, :GT_K]
        else:
            t0 = time.time()
            gt = groundtruth.exact_knn(base, queries, GT_K, metric)
            print(f"bench: exact ground truth for {len(queries)} queries in "
                  f"{time.time() - t0:.1f} s", flush=True)
        np.save(path, gt.astype(np.int32))
    return np.load(path)


def load(name, metric=None, nq=None):
    """The dataset called name (see the module doc), with its exact ground truth."""
    given_gt = None
    if name.startswith("synth-"):
        parts = name.split("-")
        n, d = _count(parts[1]), int(parts[2])
        seed = int(parts[3]) if len(parts) > 3 else 1
        def make():
            b, q, info = clustered_gaussian(n, d, seed)
            return b, q, "l2", info
    elif name.startswith("files:"):
        paths = name[len("files:"):].split(",")
        def make():
            b, q = vecio.read_any(paths[0]), vecio.read_any(paths[1])
            return b, q, metric or "l2", {"kind": "files", "files": paths}
        if len(paths) > 2:
            given_gt = vecio.read_any(paths[2])
    elif name.startswith("minilm"):
        from . import textembed
        n = _count(name.split("-")[1]) if "-" in name else None
        def make():
            b, q, info = textembed.build(n)
            return b, q, "cosine", info
    elif name.startswith("sift-images"):
        from . import siftimages
        n = _count(name.split("-")[2]) if name.count("-") > 1 else None
        def make():
            b, q, info = siftimages.build(n)
            return b, q, "l2", info
    else:
        raise SystemExit(f"unknown dataset {name!r} (synth-N-D[-SEED], files:..., minilm[-N], "
                         "sift-images[-N])")
    folder, base, queries, stored_metric, info = _materialise(name, make)
    metric = metric or stored_metric
    if nq:
        queries = queries[:nq]
    gt = ground_truth(folder, base, np.load(Path(folder) / "queries.npy"), metric, given_gt)
    return Dataset(name, base, queries, metric, gt[:len(queries)], info, Path(folder))
