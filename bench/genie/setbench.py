"""The set scenario: top-10 int4[] rows by the number of elements shared with a query,
genie against GIN and a sequential scan, on one cluster in one run.

Tables: st with the genie index (genie and the scan), st_gin with a GIN index
(intarray's gin__int_ops when intarray is there, else the built-in array_ops). Returned
rows are judged by their true common-element counts (computed here) against the exact
top-10 counts, so ties at the 10th count are not misses.
"""
import time

from gibench import db, plots

import genieplots
from common import accuracy, log, one_client, plan, qps_row, session

# genie-table: the same index and statement with gpusparse.method = term, i.e. the plain
# count table instead of c-PQ (the counting path)
ENGINES = ["genie", "genie-table", "gin", "scan"]
plots.STYLE.update({"genie": ("tab:red", "o"), "genie-table": ("tab:orange", "s"),
                    "gin": ("tab:green", "^"),
                    "scan": ("tab:gray", "X")})

GENIE = "SELECT id FROM st ORDER BY tags <&> %(q)s::int4[] LIMIT 10"
# count of common elements: intarray's intersection, or plain SQL without intarray
COUNT_INT = "icount(tags & %(q)s::int4[])"
COUNT_SQL = "(SELECT count(*) FROM unnest(tags) e WHERE e = ANY (%(q)s::int4[]))"
GIN = "SELECT id FROM st_gin WHERE tags && %(q)s::int4[] ORDER BY {c} DESC, id LIMIT 10"
SCAN = "SELECT id FROM st ORDER BY {c} DESC, id LIMIT 10"


def load(conn, ds):
    t0 = time.perf_counter()
    conn.execute("CREATE TABLE st (id int PRIMARY KEY, tags int4[]) "
                 "WITH (autovacuum_enabled = off)")
    with conn.cursor().copy("COPY st (id, tags) FROM STDIN") as cp:
        for i, r in enumerate(ds.rows):
            cp.write_row((i, r.tolist()))
    conn.execute("CREATE TABLE st_gin WITH (autovacuum_enabled = off) AS SELECT * FROM st")
    for t in ("st", "st_gin"):
        conn.execute(f"VACUUM (ANALYZE, FREEZE) {t}")
    return time.perf_counter() - t0


def build(conn, rep, state, intarray):
    opc = "gin__int_ops" if intarray else "array_ops"
    for key, ddl in (("genie", "CREATE INDEX st_tags_genie ON st USING genie (tags)"),
                     ("gin", f"CREATE INDEX st_gin_tags ON st_gin USING gin (tags {opc})")):
        conn.execute("CHECKPOINT")
        t0 = time.perf_counter()
        conn.execute(ddl)
        secs = time.perf_counter() - t0
        idx = ddl.split()[2]
        mb = db.scalar(conn, "SELECT pg_relation_size(%s::regclass)", (idx,)) / 2**20
        state[key] = {"build_s": secs, "index_mb": mb}
        log(f"genie-sets: {ddl.split(' USING ')[0]}: {secs:.1f} s, {mb:.0f} MB")
    rep.note("CREATE INDEX (s, MB of index pages): " + "; ".join(
        f"{k} {v['build_s']:.1f} s, {v['index_mb']:.0f} MB" for k, v in state.items())
        + f"; GIN operator class {opc}")


def run(cl, ds, a, rep, budget, state, engine, intarray):
    cnt = COUNT_INT if intarray else COUNT_SQL
    if engine in ("genie", "genie-table"):
        sql, nq, gucs, index = GENIE, a.set_nq, {"enable_seqscan": "off"}, "st_tags_genie"
        setting = "ORDER BY tags <&> q LIMIT 10"
        if engine == "genie-table":
            gucs["gpusparse.method"] = "term"
            setting += " (plain count table)"
    elif engine == "gin":
        sql, nq, gucs, index = GIN.format(c=cnt), a.set_slow_nq, {"enable_seqscan": "off"}, \
            "st_gin_tags"
        setting = f"WHERE tags && q ORDER BY {'icount(tags & q)' if intarray else 'count'} DESC"
    else:
        sql, nq = SCAN.format(c=cnt), min(a.set_slow_nq, a.set_scan_nq)
        gucs, index = {"enable_indexscan": "off", "enable_bitmapscan": "off"}, "Seq Scan"
        setting = "every row, parallel workers as planned"
    nq = min(nq, len(ds.queries))
    params = [{"q": q.tolist()} for q in ds.queries[:nq]]
    conn = session(cl, **gucs)
    p = plan(conn, sql, params[0])
    if index not in p:
        rep.note(f"{engine}: the plan does not use {index}: {p}")
    passes, lat, found = one_client(conn, sql, params, a.repeats, budget)
    conn.close()
    got = [ds.counts(i, [r[0] for r in res]) for i, res in enumerate(found)]
    eq, rec, first = accuracy(got, ds.gt_counts[:nq], sign=-1)
    c = min(nq, a.set_slow_nq, a.set_scan_nq)
    ceq, crec, _ = accuracy(got[:c], ds.gt_counts[:c], sign=-1)
    row = qps_row(engine, setting, nq, passes, lat, plan=p, top10_equal=eq, count_recall=rec,
                  top1_equal=first, top10_equal_common=ceq, count_recall_common=crec,
                  recall=crec, common_nq=c, short_answers=sum(1 for r in found if len(r) < 10),
                  **state.get("genie" if engine == "genie-table" else engine, {}))
    rep.add(**row)
    log(f"genie-sets: {engine}: {row['qps']:.1f} QPS over {nq} queries (p50 "
        f"{row['p50_ms']:.2f} ms), top-10 counts equal {eq:.3f}, count recall {rec:.3f}")


def finish(rep, device):
    rows = [r for r in rep.rows if r.get("qps")]
    ref = {r["engine"]: r for r in rows}
    for r in rows:
        for peer in ("genie-table", "gin", "scan"):
            if peer in ref and r["engine"] != peer:
                r[f"x_{peer}"] = r["qps"] / ref[peer]["qps"]
    rep.table("Top-10 rows by common elements: queries per second and accuracy",
              ["engine", "setting", "nq", "qps", "p50_ms", "p99_ms", "top10_equal",
               "count_recall", "top10_equal_common", "x_genie-table", "x_gin", "x_scan",
               "build_s",
               "index_mb"], rows)
    rep.plot(lambda rows, stem: genieplots.accuracy_qps(
        [r for r in rows if r.get("qps") and r.get("recall") is not None], stem,
        "count recall of the top 10 (common queries)",
        f"int4[] sets: top-10 by common elements, {device} backend"))
