"""Shared pieces of the genie benchmark: a time budget, one-client passes over prepared
statements, result rows (medians of repeats), plans, and multiset accuracy."""
import re
import time
from collections import Counter

from gibench import db
from gibench.stats import median, pct


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Budget:
    """--deadline: seconds from the start after which no measurement starts (0: none)."""

    def __init__(self, seconds):
        self.t0, self.seconds = time.time(), seconds

    def left(self):
        return float("inf") if not self.seconds else self.seconds - (time.time() - self.t0)

    def ok(self, need=0.0):
        return self.left() > need


def session(cluster, **gucs):
    """A connection with the benchmark's session settings: no JIT, a custom plan for
    every execution (so that EXPLAIN with the literal shows the plan that ran)."""
    return db.connect(cluster, jit="off", plan_cache_mode="force_custom_plan", **gucs)


def one_client(conn, sql, params, repeats, budget, warm=3):
    """Runs sql once per params (prepared), `repeats` passes after `warm` untimed
    executions; returns (pass seconds, per-query seconds, the last pass's rows)."""
    cur = conn.cursor()
    for p in params[:warm]:
        cur.execute(sql, p, prepare=True)
        cur.fetchall()
    passes, lat, found = [], [], None
    for r in range(repeats):
        if r and not budget.ok(5):
            break
        res = []
        t = time.perf_counter()
        for p in params:
            s0 = time.perf_counter()
            cur.execute(sql, p, prepare=True)
            res.append(cur.fetchall())
            lat.append(time.perf_counter() - s0)
        passes.append(time.perf_counter() - t)
        found = res
    return passes, lat, found


def qps_row(engine, setting, n, passes, lat=None, **extra):
    """A result row: QPS from the median pass, every pass's QPS, latency percentiles."""
    row = {"engine": engine, "setting": setting, "nq": n,
           "qps": n / median(passes) if passes else None,
           "qps_runs": ";".join(f"{n / p:.4g}" for p in passes)}
    if lat:
        row["p50_ms"] = pct(lat, 50) * 1e3
        row["p99_ms"] = pct(lat, 99) * 1e3
    row.update(extra)
    return row


def plan(conn, sql, p):
    """EXPLAIN (COSTS OFF) of the statement with one query, on one line, literals
    longer than 24 characters shortened."""
    rows = conn.execute("EXPLAIN (COSTS OFF) " + sql, p).fetchall()
    text = " / ".join(r[0].strip() for r in rows)
    return re.sub(r"'((?:[^']|'')*)'",
                  lambda m: m.group(0) if len(m.group(1)) <= 24 else f"'{m.group(1)[:20]}...'",
                  text)


def multiset_recall(got, want):
    """|got ∩ want| / |want| over multisets (a returned distance or count counts once
    per equal value the exact answer holds)."""
    if not len(want):
        return 1.0
    c = Counter(int(x) for x in got) & Counter(int(x) for x in want)
    return sum(c.values()) / len(want)


def accuracy(got_lists, want, sign=1):
    """(share of queries whose sorted values equal the exact ones, mean multiset recall,
    share whose best value equals the exact best). want: (nq, k) sorted best first;
    sign -1 for counts (larger is better)."""
    eq, rec, first = 0, 0.0, 0
    for g, w in zip(got_lists, want):
        g = sorted((int(x) for x in g), key=lambda v: sign * v)
        w = [int(x) for x in w]
        eq += g == w
        rec += multiset_recall(g, w)
        first += bool(g) and g[0] == w[0]
    n = len(got_lists)
    return (eq / n, rec / n, first / n) if n else (None, None, None)
