"""build: CREATE INDEX time (median of repeats), index size in pages and device bytes,
and recall@10 at each engine's default knob; Faiss builds on the same vectors."""
import time

from .. import plots, stats
from ..report import Report

COLUMNS = ["engine", "params", "build_s", "build_runs", "index_pages", "index_mb",
           "device_bytes", "knob", "recall"]


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    rep = Report("build", ds.name, ctx.env, vars(o), ctx.notes)
    n = len(ds.base)
    for eng in ctx.sql_engines:
        table, params = eng.table("src"), eng.params(n, o)
        secs = []
        for r in range(o.repeats):
            idx, s = ctx.build_index(eng, table, params)
            secs.append(s)
            ctx.log(f"build {eng.name} {params}: {s:.2f} s (run {r + 1}/{o.repeats})")
        knob = eng.default_knob(params)
        rec, _ = ctx.recall(eng, table, knob, ds.gt)
        rep.add(engine=eng.name, params=str(params), rows=n, build_s=stats.median(secs),
                build_runs=stats.runs(secs), knob=f"{eng.knob}={knob}", recall=rec,
                **ctx.index_size(idx))
        if not o.keep_indexes:
            ctx.conn.execute(f"DROP INDEX {idx}")
    for ref in ctx.ref_engines:
        params = ref.params(n, o)
        ref.threads(o.threads)
        secs = []
        for r in range(o.repeats):
            t0 = time.perf_counter()
            index = ref.build(ds.base, ds.metric, params)
            secs.append(time.perf_counter() - t0)
            ctx.log(f"build {ref.name} {params}: {secs[-1]:.2f} s")
        knob = ref.default_knob(params)
        ref.set_knob(index, knob)
        ids = ref.search(index, ds.queries, 10, ds.metric)
        size = ref.size_bytes(index)
        rep.add(engine=ref.name, params=str(params), rows=n, build_s=stats.median(secs),
                build_runs=stats.runs(secs), knob=knob, recall=stats.recall_at_k(ids, ds.gt),
                index_mb=size / 2**20 if size else None)
    rep.table(f"Index build, {n} rows, median of {o.repeats}", COLUMNS)
    rep.plot(lambda rows, stem: plots.bars(rows, stem, "build_s", "CREATE INDEX / build time",
                                           "seconds"))
    return rep
