"""The sequence scenario: top-10 by edit distance over Debian strings, genie against
pg_trgm and a levenshtein() scan, on one cluster in one run.

Tables (copies of the same rows, so that each plan has one index to pick): sq with the
genie n-gram index (genie engines and the scan), sq_gin (pg_trgm GIN), sq_gist (pg_trgm
GiST). Every engine's returned rows are judged by their true edit distance (computed
here, not taken from the engine), against the exact top-10 distances.
"""
import time

from gibench import db, plots

import genieplots
import seqdata
from common import accuracy, log, one_client, plan, qps_row, session

K = seqdata.K
ENGINES = ["genie-batch", "genie-knn", "trgm-gist-knn", "trgm-gin", "trgm-gist",
           "levenshtein-scan"]
LABELS = {
    "genie-batch": "genie_seq_search, 1,024 queries a call (candidates C)",
    "genie-knn": "genie ORDER BY s <%> q LIMIT K, re-ranked by levenshtein",
    "trgm-gist-knn": "pg_trgm GiST ORDER BY s <-> q LIMIT K, re-ranked by levenshtein",
    "trgm-gin": "pg_trgm GIN s % q (similarity threshold), ORDER BY levenshtein",
    "trgm-gist": "pg_trgm GiST s % q (similarity threshold), ORDER BY levenshtein",
    "levenshtein-scan": "levenshtein() over every row (exact)",
}
plots.STYLE.update({"genie-batch": ("tab:red", "o"), "genie-knn": ("tab:orange", "D"),
                    "trgm-gist-knn": ("tab:blue", "s"), "trgm-gin": ("tab:green", "^"),
                    "trgm-gist": ("tab:purple", "v"), "levenshtein-scan": ("tab:gray", "X")})
plots.LABELS.update(LABELS)

RERANK = ("SELECT id, levenshtein(s, %(q)s) AS d FROM (SELECT id, s FROM {t} "
          "ORDER BY s {op} %(q)s LIMIT {k}) c ORDER BY d, id LIMIT 10")
FILTER = ("SELECT id, levenshtein(s, %(q)s) AS d FROM {t} WHERE s %% %(q)s "
          "ORDER BY d, id LIMIT 10")
SCAN = "SELECT id, levenshtein(s, %(q)s) AS d FROM sq ORDER BY d, id LIMIT 10"
BATCH = ("SELECT query, ctid::text, distance, exact FROM genie_seq_search("
         "'sq_s_genie'::regclass, %s::text[], 10, %s)")


class Judge:
    """True distances of returned rows, accuracy over all queries and over the common
    prefix every engine ran."""

    def __init__(self, ds, common):
        self.ds, self.common = ds, common

    def judge(self, ids, reported=None):
        """ids[i]: returned row ids of query i; reported[i]: the engine's distances.
        Returns a dict of accuracy columns."""
        ds = self.ds
        true = [[seqdata.distance(ds.queries[i], ds.strings[j]) for j in row]
                for i, row in enumerate(ids)]
        mism = 0
        if reported is not None:
            mism = sum(int(a != b) for t, r in zip(true, reported) for a, b in zip(t, r))
        n = len(ids)
        eq, rec, first = accuracy(true, ds.gt_dist[:n])
        c = min(n, self.common)
        ceq, crec, cfirst = accuracy(true[:c], ds.gt_dist[:c])
        short = sum(1 for r in ids if len(r) < K)
        return {"top10_equal": eq, "distance_recall": rec, "top1_equal": first,
                "top10_equal_common": ceq, "distance_recall_common": crec,
                "top1_equal_common": cfirst, "recall": crec, "common_nq": c,
                "distance_mismatches": mism, "short_answers": short}


def load(conn, ds):
    """The three tables, loaded by COPY, frozen and analysed."""
    t0 = time.perf_counter()
    conn.execute("CREATE TABLE sq (id int PRIMARY KEY, s text) WITH (autovacuum_enabled = off)")
    with conn.cursor().copy("COPY sq (id, s) FROM STDIN") as cp:
        for i, s in enumerate(ds.strings):
            cp.write_row((i, s))
    for t in ("sq_gin", "sq_gist"):
        conn.execute(f"CREATE TABLE {t} WITH (autovacuum_enabled = off) AS SELECT * FROM sq")
    for t in ("sq", "sq_gin", "sq_gist"):
        conn.execute(f"VACUUM (ANALYZE, FREEZE) {t}")
    return time.perf_counter() - t0


def build(conn, rep, state):
    """CREATE INDEX for each engine's table; build seconds and sizes into state."""
    for key, ddl in (("genie", "CREATE INDEX sq_s_genie ON sq USING genie (s genie_ngram_ops)"),
                     ("gin", "CREATE INDEX sq_gin_s ON sq_gin USING gin (s gin_trgm_ops)"),
                     ("gist", "CREATE INDEX sq_gist_s ON sq_gist USING gist (s gist_trgm_ops)")):
        conn.execute("CHECKPOINT")
        t0 = time.perf_counter()
        conn.execute(ddl)
        secs = time.perf_counter() - t0
        idx = ddl.split()[2]
        mb = db.scalar(conn, "SELECT pg_relation_size(%s::regclass)", (idx,)) / 2**20
        state[key] = {"build_s": secs, "index_mb": mb}
        if key == "genie":
            st = db.device_stats(conn, idx)
            state[key]["device_mb"] = (st.get("bytes") or 0) / 2**20 or None
        log(f"genie-seq: {ddl.split(' USING ')[0]}: {secs:.1f} s, {mb:.0f} MB")
    rep.note("CREATE INDEX (s, MB of index pages): " + "; ".join(
        f"{k} {v['build_s']:.1f} s, {v['index_mb']:.0f} MB" for k, v in state.items()))


def run_genie_batch(cl, ds, judge, a, rep, budget, state):
    conn = session(cl)
    ctid = dict(conn.execute("SELECT ctid::text, id FROM sq").fetchall())
    qs = ds.queries
    batches = [qs[s:s + a.batch] for s in range(0, len(qs), a.batch)]
    conn.execute(BATCH, (qs[:8], K)).fetchall()            # the service has the index
    for cand in [int(x) for x in a.candidates.split(",")]:
        if not budget.ok(10):
            rep.note(f"genie-batch: deadline reached, candidates {cand} and above left out")
            break
        passes, rows = [], None
        for r in range(a.repeats):
            out = []
            t = time.perf_counter()
            for bi, b in enumerate(batches):
                out.append((bi, conn.execute(BATCH, (b, cand)).fetchall()))
            passes.append(time.perf_counter() - t)
            rows = out
        ids = [[] for _ in qs]
        rep_d = [[] for _ in qs]
        flag = [None] * len(qs)
        for bi, part in rows:
            for qn, tid, dist, exact in part:
                i = bi * a.batch + qn - 1
                ids[i].append(ctid[tid])
                rep_d[i].append(dist)
                flag[i] = exact
        acc = judge.judge(ids, rep_d)
        flagged = [i for i, f in enumerate(flag) if f]
        wrong = sum(1 for i in flagged
                    if sorted(seqdata.distance(qs[i], ds.strings[j]) for j in ids[i])
                    != list(ds.gt_dist[i]))
        row = qps_row("genie-batch", f"candidates {cand}, batches of {a.batch}", len(qs),
                      passes, knob="candidates", knob_value=cand,
                      batch_ms=sorted(passes)[len(passes) // 2] * 1e3 / len(batches),
                      exact_flag_rate=len(flagged) / len(qs), exact_flag_wrong=wrong,
                      plan=f"genie_seq_search(sq_s_genie, {len(batches)} x text[{a.batch}])",
                      **acc, **state.get("genie", {}))
        rep.add(**row)
        log(f"genie-seq: genie-batch candidates {cand}: {row['qps']:.0f} QPS, top-10 equal "
            f"{acc['top10_equal']:.3f}, distance recall {acc['distance_recall']:.3f}, exact "
            f"flag {row['exact_flag_rate']:.3f} ({wrong} flagged answers wrong)")
    conn.close()


def _one_client_engine(cl, ds, judge, a, rep, budget, engine, sql_of, knobs, knob,
                       nq, gucs_of, index, extra):
    """A sweep of one-query-a-statement runs over the first nq queries."""
    qs = ds.queries[:nq]
    params = [{"q": q} for q in qs]
    for v in knobs:
        if not budget.ok(10):
            rep.note(f"{engine}: deadline reached, {knob} {v} and on left out")
            break
        conn = session(cl, **gucs_of(v))
        sql = sql_of(v)
        p = plan(conn, sql, params[0])
        if index not in p:
            rep.note(f"{engine} ({knob} {v}): the plan does not use {index}: {p}")
        passes, lat, found = one_client(conn, sql, params, a.repeats, budget)
        conn.close()
        acc = judge.judge([[r[0] for r in res] for res in found],
                          [[r[1] for r in res] for res in found])
        row = qps_row(engine, f"{knob} {v}", len(qs), passes, lat, knob=knob, knob_value=v,
                      plan=p, **acc, **extra)
        rep.add(**row)
        log(f"genie-seq: {engine} {knob} {v}: {row['qps']:.1f} QPS (p50 {row['p50_ms']:.1f} "
            f"ms), top-10 equal {acc['top10_equal']:.3f}, distance recall "
            f"{acc['distance_recall']:.3f}")


def run_genie_knn(cl, ds, judge, a, rep, budget, state):
    _one_client_engine(cl, ds, judge, a, rep, budget, "genie-knn",
                       lambda k: RERANK.format(t="sq", op="<%%>", k=k),
                       [int(x) for x in a.genie_k.split(",")], "K", a.single_nq,
                       lambda k: {"enable_seqscan": "off"}, "sq_s_genie",
                       state.get("genie", {}))


def run_gist_knn(cl, ds, judge, a, rep, budget, state):
    _one_client_engine(cl, ds, judge, a, rep, budget, "trgm-gist-knn",
                       lambda k: RERANK.format(t="sq_gist", op="<->", k=k),
                       [int(x) for x in a.knn_k.split(",")], "K", a.slow_nq,
                       lambda k: {"enable_seqscan": "off"}, "sq_gist_s",
                       state.get("gist", {}))


def run_trgm_filter(cl, ds, judge, a, rep, budget, state, kind):
    t = "sq_gin" if kind == "gin" else "sq_gist"
    _one_client_engine(cl, ds, judge, a, rep, budget, f"trgm-{kind}",
                       lambda th: FILTER.format(t=t),
                       [float(x) for x in a.thresholds.split(",")], "similarity_threshold",
                       a.slow_nq, lambda th: {"enable_seqscan": "off",
                                              "pg_trgm.similarity_threshold": th},
                       f"{t}_s", state.get(kind, {}))


def run_scan(cl, ds, judge, a, rep, budget, state):
    nq = min(a.scan_nq, len(ds.queries))
    conn = session(cl, enable_indexscan="off", enable_bitmapscan="off")
    params = [{"q": q} for q in ds.queries[:nq]]
    p = plan(conn, SCAN, params[0])
    passes, lat, found = one_client(conn, SCAN, params, a.repeats, budget, warm=1)
    conn.close()
    acc = judge.judge([[r[0] for r in res] for res in found],
                      [[r[1] for r in res] for res in found])
    sql_d = [sorted(r[1] for r in res) for res in found]
    agree = sum(1 for i, d in enumerate(sql_d) if d == list(ds.gt_dist[i]))
    row = qps_row("levenshtein-scan", "parallel workers as planned", nq, passes, lat,
                  plan=p, gt_agree=f"{agree}/{nq}", **acc)
    rep.add(**row)
    rep.note(f"ground truth check: the levenshtein() scan's 10 distances equal the "
             f"rapidfuzz ground truth on {agree} of {nq} queries")
    log(f"genie-seq: levenshtein-scan: {row['qps']:.2f} QPS over {nq} queries; agrees with "
        f"the ground truth on {agree}/{nq}")


def finish(rep, a, device):
    """Ratios against GiST KNN at matched accuracy, the tables, the plot."""
    rows = [r for r in rep.rows if r.get("qps")]
    knn = [r for r in rows if r["engine"] == "trgm-gist-knn"]
    for r in rows:
        below = [k for k in knn if k["distance_recall_common"] <= r["distance_recall_common"] + 1e-9]
        if below and r["engine"] not in ("trgm-gist-knn", "levenshtein-scan"):
            k = max(below, key=lambda k: (k["distance_recall_common"], k["qps"]))
            r["x_knn_matched"] = r["qps"] / k["qps"]
            r["knn_matched"] = k["setting"]
        if knn:
            r["x_knn_best"] = r["qps"] / max(knn, key=lambda k: (
                k["distance_recall_common"], k["qps"]))["qps"]
    cols = ["engine", "setting", "nq", "qps", "p50_ms", "top10_equal", "distance_recall",
            "top1_equal", "top10_equal_common", "distance_recall_common",
            "exact_flag_rate", "x_knn_matched", "knn_matched", "x_knn_best", "build_s"]
    rep.table("Top-10 by edit distance: queries per second and accuracy "
              "(x_knn_*: QPS over pg_trgm GiST KNN's)", cols, rows)
    mt = []
    target = 100 if device == "cuda" else 2
    for k in sorted(knn, key=lambda r: r["knob_value"]):
        peer = {"peer": f"GiST KNN {k['setting']}", "peer_recall": k["distance_recall_common"],
                "peer_top10_equal": k["top10_equal_common"], "peer_qps": k["qps"]}
        for eng in ("genie-batch", "genie-knn"):
            ok = [r for r in rows if r["engine"] == eng and
                  r["distance_recall_common"] >= k["distance_recall_common"] - 1e-9]
            mark = eng == "genie-batch"
            if not ok:
                mt.append(dict(peer, engine=eng, setting="none as accurate",
                               target=f">= {target}x" if mark else "", met="no" if mark else ""))
                continue
            g = max(ok, key=lambda r: r["qps"])
            x = g["qps"] / k["qps"]
            mt.append(dict(peer, engine=eng, setting=g["setting"],
                           recall=g["distance_recall_common"],
                           top10_equal=g["top10_equal_common"], qps=g["qps"], ratio=x,
                           target=f">= {target}x" if mark else "",
                           met=("yes" if x >= target else "no") if mark else ""))
    if mt:
        rep.table("Matched accuracy: the fastest genie setting at least as accurate "
                  "(distance recall on the common queries) as each GiST KNN setting; target: "
                  f"the issue's {device} target for genie_seq_search",
                  ["peer", "peer_recall", "peer_top10_equal", "peer_qps", "engine", "setting",
                   "recall", "top10_equal", "qps", "ratio", "target", "met"], mt)
    rep.plot(lambda rows, stem: genieplots.accuracy_qps(
        [r for r in rows if r.get("qps") and r.get("recall") is not None], stem,
        "distance recall of the top 10 (common queries)",
        f"top-10 by edit distance, {device} backend"))
