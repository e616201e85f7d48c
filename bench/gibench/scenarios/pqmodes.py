"""pqmodes: the search modes of a pq gpuivf index side by side on one index (docs/pq.md):
the plain look-up table (`gpuivf.pq_search = lut`), JUNO's threshold search (`juno`) and its
hit counts (`hits`) over a range of `gpuivf.pq_select`, at several probes.

One index (quantizer 'pq', the defaults: 2-d sub-spaces, 256 entries; lists = --lists),
then for each (probes, mode, selection): recall@10 and R@100 of the batch API against the
exact answer (the dataset's queries, up to --nq, one statement), the batch statement's time
with its rows counted on the server (--repeats runs, median, 1,000 queries), and with
gpuindex.trace_stages on, the compute backend's own stages of that batch (the CUDA
backend's coarse quantizer and fine scan + top-k).  The modes share the index, the codes
and the probed lists, so the ratios compare the scoring alone."""
import numpy as np

from .. import plots, sqlsearch, stats
from ..engines import SQL_ENGINES, batch_param
from ..report import Report

COLUMNS = ["mode", "select", "probes", "recall", "recall100", "batch_ms", "qps",
           "fine_us", "coarse_us", "x_lut_qps", "x_lut_fine"]
SELECTS = {"lut": (None,), "juno": (32, 64, 128, 256), "hits": (64, 128, 256)}


def run(ctx):
    o = ctx.opts
    ds = ctx.ds
    eng = SQL_ENGINES["gpuivf_pq"]
    rep = Report("pqmodes", ds.name, ctx.env, vars(o), ctx.notes)
    n = len(ds.base)
    lists = o.lists or max(1, int(round(np.sqrt(n))))
    probes_list = [int(p) for p in (o.probes or "8,16,32").split(",")]
    table = eng.table("pqm")
    ctx.copy_table(eng, table)
    index, build_s = ctx.build_index(eng, table, {"lists": lists, **eng.extra})
    ctx.force_index(eng, table, index)
    nq = min(o.nq, len(ds.queries))
    q = np.asarray(ds.queries[:nq], dtype=np.float32)
    rep.note(f"{n} rows of {ds.dim} dimensions, {lists} lists, quantizer pq (defaults), "
             f"build {build_s:.1f} s; batches of {nq} queries through gpuivf_search_packed, "
             f"k 10 (recall@10) and k 100 (R@100); batch_ms: median of {max(3, o.repeats)} "
             f"runs, rows counted on the server; fine_us/coarse_us: the compute backend's "
             f"stages with gpuindex.trace_stages on (median of the same runs)")
    sql = sqlsearch.batch_counted_sql(eng, index, table, ds.metric)
    param = batch_param(q, eng.coltype)
    points = [(p, mode, sel) for p in probes_list for mode, selects in SELECTS.items()
              for sel in selects]
    base = None
    for probes, mode, sel in points:
        if ctx.out_of_time(rep, f"probes {probes} {mode} {sel}"):
            break
        ctx.conn.execute(f"SET gpuivf.probes = {probes}")
        ctx.conn.execute(f"SET gpuivf.pq_search = {mode}")
        if sel:
            ctx.conn.execute(f"SET gpuivf.pq_select = {sel}")
        row = _measure(ctx, eng, index, table, q, param, sql, o.repeats)
        row.update(mode=mode, select=sel or "", probes=probes)
        if mode == "lut":
            base = row
        if base and base["probes"] == probes:
            row["x_lut_qps"] = row["qps"] / base["qps"]
            row["x_lut_fine"] = (base["fine_us"] / row["fine_us"]
                                 if row.get("fine_us") and base.get("fine_us") else None)
        row["engine"] = mode if mode == "lut" else f"{mode} select {sel}"
        ctx.log(f"  probes {probes} {row['engine']}: recall {row['recall']:.3f} "
                f"R@100 {row['recall100']:.3f}, batch {row['batch_ms']:.1f} ms, "
                f"fine {row.get('fine_us')}")
        rep.add(**row)
    for s in ("gpuivf.probes", "gpuivf.pq_search", "gpuivf.pq_select", "gpuindex.trace_stages"):
        ctx.conn.execute(f"RESET {s}")
    rep.table("IVF-PQ search modes: recall and batch time (one index, same codes)", COLUMNS)
    rep.plot(lambda rows, stem: plots.recall_qps(
        [dict(r, recall=r["recall"], knob_value=r["probes"]) for r in rows],
        stem, [("qps", f"batch of {nq} queries")]))
    return rep


def _measure(ctx, eng, index, table, q, param, sql, repeats):
    found, _ = sqlsearch.batch(ctx.conn, eng, index, table, ctx.ds.metric, q, 10)
    found100, _ = sqlsearch.batch(ctx.conn, eng, index, table, ctx.ds.metric, q, 100)
    truth = ctx.ds.gt[:len(q)]
    row = {"recall": stats.recall_at_k(found, truth, 10),
           "recall100": stats.recall_at_k(found100, truth, 100)}
    times, fine, coarse = [], [], []
    for _ in range(max(3, repeats)):
        ctx.conn.execute("SET gpuindex.trace_stages = off")
        times.append(sqlsearch.timed_warm(ctx.conn, sql, (param, 10))[0])
        ctx.conn.execute("SET gpuindex.trace_stages = on")
        sqlsearch.timed_warm(ctx.conn, sql, (param, 10))
        st = dict(ctx.conn.execute("SELECT stage, us FROM gpuindex_search_stages()").fetchall())
        for name, us in st.items():
            if name.endswith("fine+topk"):
                fine.append(us)
            elif name.endswith("coarse"):
                coarse.append(us)
    row["batch_ms"] = stats.median(times) * 1e3
    row["qps"] = len(q) / stats.median(times)
    row["batch_runs"] = stats.runs(times)
    row["fine_us"] = stats.median(fine) if fine else None
    row["coarse_us"] = stats.median(coarse) if coarse else None
    return row
