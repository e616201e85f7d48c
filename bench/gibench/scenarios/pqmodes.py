"""pqmodes: the search modes of a pq gpuivf index side by side on one index (docs/pq.md):
the plain look-up table (`gpuivf.pq_search = lut`), JUNO's threshold search (`juno`) and its
hit counts (`hits`) over a range of `gpuivf.pq_select`, at several probes, and the table
search with re-ranking of `gpuivf.pq_rerank` x k candidates by exact distance.

One index per PQ engine named in --engines (gpuivf_pq: 2-d sub-spaces, 256 entries, a byte
a code; gpuivf_pq4: 16 entries, 4-bit codes two a byte; gpuivf_pq4d1: 1-d sub-spaces of 16
entries, the bytes of gpuivf_pq; gpuivf_pq alone when --engines names none; and the flat
gpuivf index of the same lists when --engines names gpuivf: its memory and recall), lists = --lists; its memory a row from gpuindex_stats (the store, device and
host parts, and its payload) and its pages; then for each (probes, mode, selection):
recall@10 and R@100 of the batch API against the exact answer (the dataset's queries, up
to --nq, one statement), the batch statement's time with its rows counted on the server
(--repeats runs, median, 1,000 queries), and with gpuindex.trace_stages on, the compute
backend's own stages of that batch (the CUDA backend's coarse quantizer and fine scan +
top-k).  The modes of an index share its codes and the probed lists, so the ratios to its
`lut` row compare the scoring alone.  With --refs faiss-gpu-ivfpq, Faiss's GPU IVF-PQ on the
same vectors and lists in the same run (FaissGpuPqCli: its search call alone, and its
device bytes a vector)."""
import numpy as np

from .. import plots, sqlsearch, stats
from ..engines import SQL_ENGINES, batch_param
from ..report import Report

COLUMNS = ["index", "mode", "select", "probes", "recall", "recall100", "batch_ms", "qps",
           "fine_us", "coarse_us", "x_lut_qps", "x_lut_fine"]
MEMORY_COLUMNS = ["index", "rows", "store_bytes_row", "payload_bytes_row", "index_bytes_row",
                  "build_s"]
# the selective modes' selections, as a share of the codebook's entries
SELECTS = {"lut": (None,), "juno": (8, 4, 2, 1), "hits": (4, 2, 1)}
RERANK = 4


def run(ctx):
    o = ctx.opts
    ds = ctx.ds
    names = [e for e in o.engines.split(",") if e.startswith("gpuivf_pq")] or ["gpuivf_pq"]
    # the flat index beside them when --engines names gpuivf: its memory and its recall
    if "gpuivf" in o.engines.split(","):
        names.append("gpuivf")
    rep = Report("pqmodes", ds.name, ctx.env, vars(o), ctx.notes)
    n = len(ds.base)
    lists = o.lists or max(1, int(round(np.sqrt(n))))
    probes_list = [int(p) for p in (o.probes or "8,16,32").split(",")]
    nq = min(o.nq, len(ds.queries))
    q = np.asarray(ds.queries[:nq], dtype=np.float32)
    rep.note(f"{n} rows of {ds.dim} dimensions, {lists} lists, indexes {', '.join(names)}; "
             f"batches of {nq} queries through gpuivf_search_packed, "
             f"k 10 (recall@10) and k 100 (R@100); batch_ms: median of {max(3, o.repeats)} "
             f"runs, rows counted on the server; fine_us/coarse_us: the compute backend's "
             f"stages with gpuindex.trace_stages on (median of the same runs); selections "
             f"(pq_select) are the codebook's entries divided by the select column; "
             f"'lut rerank {RERANK}': the table search, then {RERANK} x k candidates "
             f"re-ranked by exact distance (gpuivf.pq_rerank)")
    mem = []
    for name in names:
        eng = SQL_ENGINES[name]
        flat = not (eng.extra or {}).get("quantizer")
        extra = {k: str(ds.dim) if v == "DIM" else v for k, v in (eng.extra or {}).items()}
        ksub = 2 ** int(extra.get("pq_bits", 8))
        table = eng.table("pqm")
        ctx.copy_table(eng, table)
        index, build_s = ctx.build_index(eng, table, {"lists": lists, **extra})
        ctx.force_index(eng, table, index)
        mem.append(rep.add(kind="memory", **_memory(ctx, index, name, n, build_s)))
        sql = sqlsearch.batch_counted_sql(eng, index, table, ds.metric)
        param = batch_param(q, eng.coltype)
        points = [(p, mode, sel) for p in probes_list for mode, selects in SELECTS.items()
                  for sel in selects] + [(p, "lut", "rerank") for p in probes_list]
        if flat:
            points = [(p, "lut", None) for p in probes_list]
        base = {}
        for probes, mode, sel in points:
            if ctx.out_of_time(rep, f"{name} probes {probes} {mode} {sel}"):
                break
            ctx.conn.execute(f"SET gpuivf.probes = {probes}")
            ctx.conn.execute(f"SET gpuivf.pq_search = {mode}")
            ctx.conn.execute(f"SET gpuivf.pq_rerank = {RERANK if sel == 'rerank' else 0}")
            if sel and sel != "rerank":
                ctx.conn.execute(f"SET gpuivf.pq_select = {max(1, ksub // sel)}")
            row = _measure(ctx, eng, index, table, q, param, sql, o.repeats)
            label = ("flat" if flat else mode if not sel else
                     f"lut rerank {RERANK}" if sel == "rerank"
                     else f"{mode} select {max(1, ksub // sel)}")
            row.update(index=name, mode=label, select=max(1, ksub // sel) if sel and
                       sel != "rerank" else "", probes=probes)
            if mode == "lut" and not sel:
                base[probes] = row
            if probes in base:
                b = base[probes]
                row["x_lut_qps"] = row["qps"] / b["qps"]
                row["x_lut_fine"] = (b["fine_us"] / row["fine_us"]
                                     if row.get("fine_us") and b.get("fine_us") else None)
            row["engine"] = f"{name} {label}"
            ctx.log(f"  {name} probes {probes} {label}: recall {row['recall']:.3f} "
                    f"R@100 {row['recall100']:.3f}, batch {row['batch_ms']:.1f} ms, "
                    f"fine {row.get('fine_us')}")
            rep.add(**row)
        for s in ("gpuivf.probes", "gpuivf.pq_search", "gpuivf.pq_select", "gpuivf.pq_rerank",
                  "gpuindex.trace_stages"):
            ctx.conn.execute(f"RESET {s}")
        ctx.conn.execute(f"DROP TABLE {table} CASCADE")
    # the GPU peer in the same run: Faiss's IVF-PQ on the same vectors and lists
    for ref in [r for r in ctx.ref_engines if getattr(r, "mode", "") == "pqsweep"]:
        if not ctx.out_of_time(rep, f"{ref.name} (whole sweep)", reserve=10):
            ctx.guarded(rep, ref.name, _faiss_pq, ctx, rep, ref, lists, probes_list, nq, mem)
    modes = [r for r in rep.rows if r.get("kind") != "memory"]
    rep.table("Memory a row of each index", MEMORY_COLUMNS, rows=mem)
    rep.table("IVF-PQ search modes: recall and batch time (one index per row group, same "
              "codes within it)", COLUMNS, rows=modes)
    rep.plot(lambda rows, stem: plots.recall_qps(
        [dict(r, recall=r["recall"], knob_value=r["probes"]) for r in rows
         if r.get("kind") != "memory"],
        stem, [("qps", f"batch of {nq} queries")]))
    return rep


def _faiss_pq(ctx, rep, ref, lists, probes_list, nq, mem):
    """Faiss GPU IVF-PQ's rows: one a (table mode, probes), the whole batch in one call
    (no database: compare with the fine_us + coarse_us of ours), and its memory."""
    o = ctx.opts
    passes = max(3, o.repeats)
    rows = ref.run_sweep(ctx.ds, lists, probes_list, [nq], ctx.cluster.dir / "faiss-gpu",
                         repeats=passes, timeout=max(10, min(ref.timeout, ctx.time_left())),
                         log=ctx.log)
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        mem.append(rep.add(kind="memory", index=system, rows=int(mine[0]["dataset_n"]),
                           store_bytes_row=mine[0].get("bytes_per_vector"),
                           build_s=mine[0].get("build_s")))
        for r in mine:
            row = dict(index=system, mode="faiss", select="", probes=int(r["probes"]),
                       recall=r["recall10"], batch_ms=nq / r["qps"] * 1e3, qps=r["qps"],
                       engine=f"{system} lut", batch_runs=f"median of {passes}")
            ctx.log(f"  {system} probes {row['probes']}: recall {row['recall']:.3f}, "
                    f"batch {row['batch_ms']:.2f} ms")
            rep.add(**row)
    rep.note(f"{ref.name} = {ref.label}: {ref.binary} pqsweep, M = dim / 2, 8 bits, "
             f"training 100 x 256 residuals and 10 iterations as ours; its batch_ms is the "
             f"search call alone (median of {passes} passes), to set beside our "
             f"coarse_us + fine_us; its memory is the device bytes a vector it reports")


def _memory(ctx, index, name, n, build_s):
    """The index's store bytes and payload a row (gpuindex_stats) and its pages a row."""
    sqlsearch.batch(ctx.conn, SQL_ENGINES[name], index, None, ctx.ds.metric,
                    np.asarray(ctx.ds.queries[:1], dtype=np.float32), 1)
    st = ctx.conn.execute("SELECT rows, bytes, payload_bytes FROM gpuindex_stats "
                          "WHERE indexrelid = %s::regclass", (index,)).fetchone()
    pages = ctx.conn.execute("SELECT pg_relation_size(%s::regclass)", (index,)).fetchone()[0]
    rows = st[0] if st and st[0] else n
    row = {"index": name, "rows": rows,
           "store_bytes_row": st[1] / rows if st else None,
           "payload_bytes_row": st[2] / rows if st else None,
           "index_bytes_row": pages / n, "build_s": build_s}
    ctx.log(f"  {name}: memory {row}")
    return row


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
