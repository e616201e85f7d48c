"""stages: where one query and a batch spend their time, stage by stage, from SQL.

gpuivf only (it is a breakdown of gpuindex's own path, not a comparison): the table of the
dataset, lists = --lists (default sqrt(rows)), probes = --knob (default 32).  For one
query a statement (`ORDER BY embedding <-> $1 LIMIT 10`, prepared, --nq statements) and
for batches of 1,000 and 10,000 queries (gpuivf_search_packed, rows counted on the
server), each statement is followed by `gpuindex_search_stages()`, which reports that
statement's stages (docs/query-path.md); medians over the statements.  Run twice: with
gpuindex.trace_stages off (the totals as users see them) and on (the compute backend's own
stages too; the CUDA backend then waits for each stage).  Each stage's floor is computed
from the bytes it moves or the flops it does and the peaks given by --floor-* options
(defaults: an H100 SXM), so the report says how far each stage is from its floor."""
import time

import numpy as np

from .. import sqlsearch, stats
from ..engines import batch_param
from ..report import Report

COLUMNS = ["mode", "trace", "stage", "us", "floor_us", "x_floor", "runs"]
BATCHES = (1000, 10000)

# peaks of an H100 SXM (the floors); the measured host link is lower than PCIe 5's 64 GB/s
HBM_GBS = 3350.0
LINK_GBS = 50.0
FP64_TFLOPS = 67.0
HOST_COPY_GBS = 10.0


def run(ctx):
    o = ctx.opts
    ds = ctx.ds
    eng = next((e for e in ctx.sql_engines if e.am == "gpuivf"), None)
    rep = Report("stages", ds.name, ctx.env, vars(o), ctx.notes)
    if eng is None:
        rep.note("stages: gpuivf is not among the engines")
        return rep
    n = len(ds.base)
    lists = o.lists or max(1, int(round(np.sqrt(n))))
    probes = o.knob or 32
    table = eng.table("st")
    ctx.copy_table(eng, table)
    index, build_s = ctx.build_index(eng, table, {"lists": lists})
    ctx.conn.execute(f"SET {eng.knob} = {probes}")
    ctx.force_index(eng, table, index)
    rep.note(f"{n} rows of {ds.dim} dimensions, {lists} lists, probes {probes}, k 10; "
             f"medians over the statements; floors at HBM {HBM_GBS:.0f} GB/s, host link "
             f"{LINK_GBS:.0f} GB/s, FP64 {FP64_TFLOPS:.0f} TFLOP/s, host copies "
             f"{HOST_COPY_GBS:.0f} GB/s")
    q = np.asarray(ds.queries, dtype=np.float32)
    per_list = n / lists
    for trace in (False, True):
        ctx.conn.execute(f"SET gpuindex.trace_stages = {'on' if trace else 'off'}")
        single = f"SELECT id FROM {table} ORDER BY embedding <-> %s::real[] LIMIT 10"
        runs = []
        # array literals made before timing: the client's own work stays out
        lits = ["{" + ",".join(f"{x:.9g}" for x in q[i]) + "}" for i in range(min(o.nq, len(q)))]
        for v in lits:
            t0 = time.perf_counter()
            ctx.conn.execute(single, (v,), prepare=True).fetchall()
            wall = time.perf_counter() - t0
            st = dict(ctx.conn.execute("SELECT stage, us FROM gpuindex_search_stages()").fetchall())
            st["statement (client)"] = wall * 1e6
            runs.append(st)
        # the same client, statement and a one-row primary-key lookup: what any
        # indexed single-row statement costs from this client
        trivial = []
        for i in range(min(o.nq, len(q))):
            t0 = time.perf_counter()
            ctx.conn.execute(f"SELECT id FROM {table} WHERE id = %s", (i,),
                             prepare=True).fetchall()
            trivial.append(time.perf_counter() - t0)
        runs[0]["statement: btree lookup (client)"] = stats.median(trivial) * 1e6
        _add(rep, "1 query", trace, runs, _floors(1, ds.dim, lists, probes, per_list))
        sql = sqlsearch.batch_counted_sql(eng, index, table, ds.metric)
        for nq in BATCHES:
            if ctx.out_of_time(rep, f"batch {nq}"):
                break
            param = batch_param(np.resize(q, (nq, ds.dim)), eng.coltype)
            runs = []
            for _ in range(max(3, o.repeats)):
                s, _rows = sqlsearch.timed_warm(ctx.conn, sql, (param, 10))
                st = dict(ctx.conn.execute(
                    "SELECT stage, us FROM gpuindex_search_stages()").fetchall())
                st["statement (client)"] = s * 1e6
                runs.append(st)
            _add(rep, f"batch {nq}", trace, runs, _floors(nq, ds.dim, lists, probes, per_list))
    ctx.conn.execute("RESET gpuindex.trace_stages")
    ctx.conn.execute(f"RESET {eng.knob}")
    rep.table("Stages of one query and of batches (microseconds, medians)", COLUMNS)
    rep.plot(_plot)
    return rep


def _floors(nq, dim, lists, probes, per_list):
    """Floor of each stage in microseconds (None: no meaningful floor)."""
    qbytes = nq * dim * 4
    rbytes = nq * 10 * 16
    return {
        "search: h2d": qbytes / (LINK_GBS * 1e3),
        "search: coarse": 2.0 * nq * lists * dim / (FP64_TFLOPS * 1e6),
        "search: fine+topk": nq * probes * per_list * dim * 4 / (HBM_GBS * 1e3),
        "search: d2h": rbytes / (LINK_GBS * 1e3),
        "submit": qbytes / (HOST_COPY_GBS * 1e3),
        "copy out": rbytes / (HOST_COPY_GBS * 1e3),
    }


def _add(rep, mode, trace, runs, floors):
    names = []
    for r in runs:
        names += [k for k in r if k not in names]
    for name in names:
        vals = [r[name] for r in runs if name in r and r[name] is not None and r[name] >= 0]
        if not vals:
            continue
        us = stats.median(vals)
        fl = floors.get(name)
        rep.add(mode=mode, trace="on" if trace else "off", stage=name, us=us,
                floor_us=fl, x_floor=(us / fl) if fl else None, runs=len(vals))


def _plot(rows, stem):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    skip = {"total", "statement (client)", "statement: btree lookup (client)", "requests",
            "search"}
    modes = [m for m in dict.fromkeys(r["mode"] for r in rows)]
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 4.2))
    axes = np.atleast_1d(axes)
    for ax, mode in zip(axes, modes):
        sel = [r for r in rows if r["mode"] == mode and r["trace"] == "on" and
               r["stage"] not in skip and r["us"] > 0]
        ax.barh([r["stage"] for r in sel], [r["us"] for r in sel], color="tab:blue",
                label="measured")
        ax.barh([r["stage"] for r in sel], [r["floor_us"] or 0 for r in sel], color="tab:orange",
                label="floor")
        ax.set_xscale("log")
        ax.set_xlabel("microseconds (log)")
        ax.set_title(mode, fontsize=10)
        ax.invert_yaxis()
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = f"{stem}-stages.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path.split("/")[-1]]
