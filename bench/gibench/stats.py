"""Recall and robust summaries (medians over repeats, latency percentiles)."""
import statistics

import numpy as np


def recall_at_k(found, truth, k=10):
    """Mean over queries of |found[i][:k] & truth[i][:k]| / k.

    found: list of id sequences (may be shorter than k); truth: (nq, >=k) array of ids."""
    hits = 0
    for f, t in zip(found, truth):
        hits += len(set(int(x) for x in list(f)[:k]) & set(int(x) for x in t[:k]))
    return hits / (k * len(found)) if len(found) else float("nan")


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def pct(values, p):
    return float(np.percentile(np.asarray(values, dtype=float), p)) if len(values) else None


def runs(values, fmt="{:.4g}"):
    """All repeats, for the CSV: '1.2;1.3;1.25'."""
    return ";".join(fmt.format(v) for v in values if v is not None)
