"""The LSH scenario: top-10 by L2 over real-valued vectors, genie's E2LSH operator class
(rows ranked by the number of the m hash functions they share with the query, then
optionally re-ranked by true L2) against gpuivf, on one cluster in one run.

Table lv (id, v real[]) holds the dataset's base rows (gibench.datasets: cached, with
the exact top 100 of every query) and every index: one genie index per (m, w), each
with lists = m * d so that no two function values share a list, and one gpuivf index.
The planner picks the genie index whose parameters are the query constant's; each
setting's plan is checked for the index it is meant to use. Returned ids are judged
against the exact top 10 (recall@10).
"""
import math
import time

import numpy as np

from gibench import datasets, db, plots
from gibench.engines import default_lists

import genieplots
from common import log, one_client, plan, qps_row, session

K = 10
ENGINES = ["gpuivf", "genie-count", "genie-rerank"]
COLORS = ["tab:red", "tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:purple",
          "tab:cyan", "tab:gray"]
plots.STYLE.update({"gpuivf": ("tab:blue", "s")})

QUERY = "genie_e2lsh(%(q)s::real[], {m}, {w}, {d}, 0)"
COUNT = "SELECT id FROM lv ORDER BY v <~> {q} LIMIT 10"
RERANK = ("SELECT id FROM (SELECT id, v FROM lv ORDER BY v <~> {q} LIMIT {c}) s "
          "ORDER BY v <-> %(q)s::real[] LIMIT 10")
IVF = "SELECT id FROM lv ORDER BY v <-> %(q)s::real[] LIMIT 10"
# (epsilon, delta) pairs whose genie_lsh_functions values the report lists
TAU_PAIRS = [(0.05, 0.05), (0.1, 0.05), (0.1, 0.1), (0.15, 0.05), (0.2, 0.05), (0.25, 0.1)]


def configs(text):
    """'32:16,128:8' -> [(32, 16.0), (128, 8.0)]: (m, w) of each genie index."""
    out = []
    for part in text.split(","):
        m, w = part.strip().split(":")
        out.append((int(m), float(w)))
    return out


def index_name(m, w):
    return f"lv_genie_m{m}_w{w:g}".replace(".", "_")


def e2lsh_collision(r, w):
    """P(two vectors at L2 distance r share one E2LSH value of width w) (Datar et al.)."""
    if r <= 0:
        return 1.0
    c = w / r
    phi = 0.5 * (1 + math.erf(-c / math.sqrt(2)))
    return 1 - 2 * phi - 2 / (math.sqrt(2 * math.pi) * c) * (1 - math.exp(-c * c / 2))


def load_data(name, n=256):
    """The dataset (with its exact top 100) and its distance scale over the first n
    queries: median L2 to the 1st, 10th and 100th nearest row and to a random row."""
    import numpy as np
    ds = datasets.load(name)
    n = min(n, len(ds.queries))
    q = ds.queries[:n].astype(np.float64)
    scale = {}
    for rank in (1, 10, 100):
        nb = np.asarray(ds.base)[ds.gt[:n, rank - 1]].astype(np.float64)
        scale[f"d{rank}"] = float(np.median(np.linalg.norm(nb - q, axis=1)))
    rows = np.random.default_rng(0).integers(0, len(ds.base), n)
    scale["d_random"] = float(np.median(np.linalg.norm(
        np.asarray(ds.base)[rows].astype(np.float64) - q, axis=1)))
    return ds, scale


def load(conn, ds):
    """Table lv by binary COPY, frozen and analysed; returns seconds."""
    import numpy as np
    t0 = time.perf_counter()
    conn.execute("CREATE TABLE lv (id bigint PRIMARY KEY, embedding real[]) "
                 "WITH (autovacuum_enabled = off)")
    db.copy_vectors(conn, "lv", np.arange(len(ds.base)), ds.base, "real[]")
    conn.execute("ALTER TABLE lv RENAME COLUMN embedding TO v")
    conn.execute("VACUUM (ANALYZE, FREEZE) lv")
    return time.perf_counter() - t0


def _create(conn, key, ddl, idx, state):
    conn.execute("CHECKPOINT")
    t0 = time.perf_counter()
    conn.execute(ddl)
    secs = time.perf_counter() - t0
    mb = db.scalar(conn, "SELECT pg_relation_size(%s::regclass)", (idx,)) / 2**20
    state[key] = {"build_s": secs, "index_mb": mb}
    log(f"genie-lsh: {ddl.split(' WITH ')[0]}: {secs:.1f} s, {mb:.0f} MB")


def build(conn, ds, a, rep, state, budget):
    """CREATE INDEX: a genie index per (m, w), then gpuivf (lists = sqrt(rows))."""
    for m, w in configs(a.lsh_configs):
        if not budget.ok(30):
            rep.note(f"genie m={m} w={w:g}: not built (deadline)")
            continue
        lists = min(m * a.lsh_d, 1 << 24)
        _create(conn, (m, w), f"CREATE INDEX {index_name(m, w)} ON lv USING genie "
                f"(v genie_e2lsh_ops (m = {m}, w = {w:g}, d = {a.lsh_d})) "
                f"WITH (lists = {lists})", index_name(m, w), state)
        state[(m, w)]["lists"] = lists
    lists = a.ivf_lists or default_lists(len(ds.base))
    _create(conn, "gpuivf", f"CREATE INDEX lv_ivf ON lv USING gpuivf (v real_l2_ops) "
            f"WITH (lists = {lists})", "lv_ivf", state)
    state["gpuivf"]["lists"] = lists
    rep.note("CREATE INDEX (s, MB of index pages): " + "; ".join(
        f"{_label_of(k)} {v['build_s']:.1f} s, {v['index_mb']:.0f} MB"
        for k, v in state.items()))


def _label_of(key):
    return key if isinstance(key, str) else f"genie m={key[0]} w={key[1]:g}"


def _recall(found, gt):
    """Mean |returned ids ∩ exact top 10| / 10, overall and per query."""
    per = [len({r[0] for r in res} & set(int(x) for x in g[:K])) / K
           for res, g in zip(found, gt)]
    return sum(per) / len(per) if per else None, per


def _measure(cl, ds, a, rep, budget, engine, config, sql, nq, gucs, index, knob, value,
             extra):
    params = [{"q": q.tolist()} for q in ds.queries[:nq]]
    conn = session(cl, **gucs)
    p = plan(conn, sql, params[0])
    if index not in p:
        rep.note(f"{engine} {config} ({knob} {value}): the plan does not use {index}: {p}")
    passes, lat, found = one_client(conn, sql, params, a.repeats, budget)
    conn.close()
    rec, per = _recall(found, ds.gt)
    common = min(nq, a.lsh_nq)
    row = qps_row(engine, f"{config}, {knob} {value}".lstrip(", "), nq, passes, lat,
                  config=config, knob=knob, knob_value=value, recall_all=rec,
                  recall=sum(per[:common]) / common, common_nq=common,
                  short_answers=sum(1 for r in found if len(r) < K), plan=p, **extra)
    rep.add(**row)
    log(f"genie-lsh: {engine} {config} {knob} {value}: {row['qps']:.1f} QPS (p50 "
        f"{row['p50_ms']:.2f} ms), recall@10 {row['recall']:.3f} over {common} queries")
    return row


def run_genie(cl, ds, a, rep, budget, state, rerank):
    """genie-count: ORDER BY v <~> q LIMIT 10 (count order); genie-rerank: the top C by
    count re-ranked by <-> (L2) in SQL."""
    cs = [int(x) for x in a.rerank.split(",")] if rerank else [K]
    for m, w in configs(a.lsh_configs):
        if (m, w) not in state:
            continue
        q = QUERY.format(m=m, w=f"{w:g}", d=a.lsh_d)
        extra = dict(state[(m, w)], m=m, w=w, d=a.lsh_d)
        for c in cs:
            if not budget.ok(10):
                rep.note(f"genie m={m} w={w:g}: deadline reached, C {c} and on left out")
                return
            sql = RERANK.format(q=q, c=c) if rerank else COUNT.format(q=q)
            _measure(cl, ds, a, rep, budget, "genie-rerank" if rerank else "genie-count",
                     f"m={m} w={w:g}", sql, a.lsh_nq, {"enable_seqscan": "off"},
                     index_name(m, w), "C", c, extra)


def run_gpuivf(cl, ds, a, rep, budget, state):
    if "gpuivf" not in state:
        return
    lists = state["gpuivf"]["lists"]
    for probes in [int(x) for x in a.probes.split(",")]:
        if probes > lists:
            continue
        if not budget.ok(10):
            rep.note(f"gpuivf: deadline reached, probes {probes} and on left out")
            return
        _measure(cl, ds, a, rep, budget, "gpuivf", f"lists={lists}", IVF,
                 min(a.ivf_nq, len(ds.queries)),
                 {"enable_seqscan": "off", "gpuivf.probes": probes}, "lv_ivf", "probes",
                 probes, dict(state["gpuivf"]))


def tau(conn, a, scale):
    """genie_lsh_functions at fixed (epsilon, delta), and per m used the smallest epsilon
    (step 0.005) whose exact binomial requirement at delta 0.05 is at most m."""
    rows = []
    for e, d in TAU_PAIRS:
        b, n = conn.execute("SELECT * FROM genie_lsh_functions(%s, %s)", (e, d)).fetchone()
        rows.append({"epsilon": e, "delta": d, "bound": b, "binomial": n,
                     "simulated_at_binomial": simulated_failure(n, e),
                     "simulated_at_binomial_minus_1": simulated_failure(n - 1, e)})
    per_m = []
    grid = [round(0.03 + 0.005 * i, 3) for i in range(95)]
    need = {e: conn.execute("SELECT * FROM genie_lsh_functions(%s, 0.05)", (e,)).fetchone()
            for e in grid}
    for m, w in configs(a.lsh_configs):
        ok = [e for e in grid if need[e][1] <= m]
        s = {k: e2lsh_collision(v, w) for k, v in scale.items()}
        eps = ok[0] if ok else None
        per_m.append({"m": m, "w": w, "epsilon_at_delta_0.05": eps,
                      "bound_at_that_epsilon": need[eps][0] if eps else None,
                      "s_d1": s["d1"], "s_d10": s["d10"], "s_d100": s["d100"],
                      "s_random": s["d_random"],
                      "epsilon_to_split_d10_d100": (s["d10"] - s["d100"]) / 2,
                      "m_binomial_for_that": _m_for(conn, (s["d10"] - s["d100"]) / 2)})
    return rows, per_m


def simulated_failure(m, eps, trials=20000, seed=7):
    """The largest P(|c/m - s| > eps) over s in a grid of 201 values in [0, 1], estimated
    by drawing the count c of m hash functions, each colliding with probability s."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for s in np.linspace(0.0, 1.0, 201):
        c = rng.binomial(m, s, size=trials)
        worst = max(worst, float(np.mean(np.abs(c / m - s) > eps + 1e-12)))
    return round(worst, 4)


def _m_for(conn, eps):
    """genie_lsh_functions(eps, 0.05) as 'binomial (bound)', or why not."""
    if eps < 0.01:
        return f"epsilon {eps:.4f} < 0.01: beyond the function's range"
    b, n = conn.execute("SELECT * FROM genie_lsh_functions(%s, 0.05)", (eps,)).fetchone()
    return f"{n} ({b})"


def finish(rep, device, taus):
    """Ratios of gpuivf over genie at equal recall, the tables (taus: tau()'s), the plot."""
    rows = [r for r in rep.rows if r.get("qps")]
    ivf = [r for r in rows if r["engine"] == "gpuivf"]
    for r in rows:
        if r["engine"] == "gpuivf":
            continue
        ok = [g for g in ivf if g["recall"] >= r["recall"] - 1e-9]
        if ok:
            g = max(ok, key=lambda g: g["qps"])
            r["ivf_matched"] = g["setting"]
            r["ivf_matched_recall"] = g["recall"]
            r["x_ivf_over_genie"] = g["qps"] / r["qps"]
    rep.table("Top 10 by L2: queries per second and recall@10 (over the first common_nq "
              "queries; recall_all over all nq); x_ivf_over_genie: the fastest gpuivf "
              "setting at equal or higher recall, its QPS over genie's",
              ["engine", "setting", "nq", "qps", "p50_ms", "p99_ms", "recall", "recall_all",
               "ivf_matched", "ivf_matched_recall", "x_ivf_over_genie", "build_s",
               "index_mb"], rows)
    pairs, per_m = taus
    rep.table("genie_lsh_functions(epsilon, delta): hash functions the tau-ANN guarantee "
              "asks for (bound: GENIE's concentration bound; binomial: exact), and by "
              "simulation the largest P(|c/m - s| > epsilon) over s at the binomial m and "
              "one below (20,000 draws of c per s)",
              ["epsilon", "delta", "bound", "binomial", "simulated_at_binomial",
               "simulated_at_binomial_minus_1"], pairs)
    rep.table("Per (m, w) used: the smallest epsilon (step 0.005) it guarantees at delta "
              "0.05 (genie_lsh_functions' binomial m <= the m used) and that epsilon's "
              "bound; the E2LSH collision probability s at the median distance to the 1st, "
              "10th, 100th nearest and a random row; the functions (binomial, bound at "
              "delta 0.05) for epsilon = (s_d10 - s_d100) / 2",
              ["m", "w", "epsilon_at_delta_0.05", "bound_at_that_epsilon", "s_d1", "s_d10",
               "s_d100", "s_random", "epsilon_to_split_d10_d100", "m_binomial_for_that"],
              per_m)

    def figure(rows, stem):
        pts, names = [], {}
        for r in rows:
            if not r.get("qps") or r.get("recall") is None:
                continue
            name = r["engine"] if r["engine"] == "gpuivf" else f"genie E2LSH {r['config']}"
            if name != "gpuivf" and name not in names:
                names[name] = COLORS[len(names) % len(COLORS)]
                plots.STYLE[name] = (names[name], "o")
            pts.append(dict(r, engine=name))
        return genieplots.accuracy_qps(
            pts, stem, "recall@10",
            f"top 10 by L2, {device} backend: genie E2LSH (labels: C, 10 = count "
            "order)\nagainst gpuivf (labels: probes)")
    rep.plot(figure)
