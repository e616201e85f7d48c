"""Int-array sets for the set scenario: seeded rows of distinct Zipf-distributed elements,
queries drawn by the same law, and the exact top-k by the number of common elements
(numpy: per query, a bincount over the posting lists of its elements).

An element's rank r (1..universe) has probability proportional to 1 / r^zipf; ranks are
mapped to element ids by a seeded permutation (1..universe), so that frequent elements
are not the small numbers. A row draws its size uniformly in ROW_SIZE, a query in
QUERY_SIZE, and then distinct elements by that law (draws with replacement, first
distinct ones kept). Nothing is cached: the generation takes seconds.
"""
import time

import numpy as np

K = 10
SEED = 20261125
ROW_SIZE = (10, 50)
QUERY_SIZE = (5, 20)


def name_of(rows, universe, zipf):
    n = f"{rows // 1000}k" if rows % 1000 == 0 else str(rows)
    return f"zipf{zipf:g}-{n}-u{universe // 1000}k"


def _draw(rng, cdf, perm, sizes):
    """Lists of distinct element ids, one per size."""
    width = int(sizes.max()) * 4
    out = []
    for s in sizes:
        got = np.empty(0, dtype=np.int64)
        while len(got) < s:
            ranks = np.searchsorted(cdf, rng.random(width), side="right")
            ids = perm[np.minimum(ranks, len(perm) - 1)]
            allids = np.concatenate([got, ids])
            _, first = np.unique(allids, return_index=True)
            got = allids[np.sort(first)]
        out.append(got[:s])
    return out


class SetData:
    """Rows and queries (arrays of distinct int ids), the exact top-K counts."""

    def __init__(self, name, rows, queries, universe, stats):
        self.name, self.rows, self.queries, self.stats = name, rows, queries, stats
        self.universe = universe
        self.gt_counts = None

    def counts(self, qi, ids):
        """True number of common elements of query qi with the given rows."""
        q = self.queries[qi]
        return np.array([len(np.intersect1d(self.rows[i], q, assume_unique=True))
                         for i in ids], dtype=np.int64)

    def postings(self):
        """Element id -> the rows that hold it (CSR arrays: start offsets, row ids)."""
        elems = np.concatenate(self.rows)
        owner = np.repeat(np.arange(len(self.rows)), [len(r) for r in self.rows])
        order = np.argsort(elems, kind="stable")
        start = np.zeros(self.universe + 2, dtype=np.int64)
        np.cumsum(np.bincount(elems, minlength=self.universe + 1), out=start[1:])
        return start, owner[order]


def make(rows, nq, universe, zipf, log=print):
    t0 = time.time()
    rng = np.random.default_rng(SEED)
    w = 1.0 / np.arange(1, universe + 1, dtype=np.float64) ** zipf
    cdf = np.cumsum(w / w.sum())
    perm = rng.permutation(universe).astype(np.int64) + 1
    rsz = rng.integers(ROW_SIZE[0], ROW_SIZE[1] + 1, size=rows)
    qsz = rng.integers(QUERY_SIZE[0], QUERY_SIZE[1] + 1, size=nq)
    rl = _draw(rng, cdf, perm, rsz)
    ql = _draw(rng, cdf, perm, qsz)
    name = name_of(rows, universe, zipf)
    df = np.bincount(np.concatenate(rl), minlength=universe + 1)
    stats = {"name": name, "rows": rows, "queries": nq, "universe": universe, "zipf": zipf,
             "row_size": list(ROW_SIZE), "query_size": list(QUERY_SIZE), "seed": SEED,
             "elements_mean": round(float(rsz.mean()), 2),
             "query_elements_mean": round(float(qsz.mean()), 2),
             "distinct_elements_used": int((df > 0).sum()),
             "most_frequent_element_row_share": round(float(df.max() / rows), 4)}
    ds = SetData(name, rl, ql, universe, stats)
    c, hit = _topk_counts(ds)
    ds.gt_counts = c
    # rows sharing at least one element with the query: what a GIN && scan visits
    stats["overlap_rows_mean_share"] = round(float(hit.mean() / rows), 4)
    stats["gt_first_count_mean"] = round(float(c[:, 0].mean()), 2)
    stats["gt_kth_count_mean"] = round(float(c[:, -1].mean()), 2)
    stats["built_seconds"] = round(time.time() - t0, 1)
    log(f"genie-sets: {name}: {stats}")
    return ds


def _topk_counts(ds, k=K):
    """(nq, k) largest common-element counts, descending, and per query the number of
    rows with at least one common element."""
    start, post = ds.postings()
    n = len(ds.rows)
    out = np.zeros((len(ds.queries), k), dtype=np.int64)
    hit = np.zeros(len(ds.queries))
    for i, q in enumerate(ds.queries):
        cnt = np.bincount(np.concatenate([post[start[e]:start[e + 1]] for e in q]),
                          minlength=n)
        out[i] = -np.sort(-np.partition(cnt, n - k)[n - k:])
        hit[i] = np.count_nonzero(cnt)
    return out, hit
