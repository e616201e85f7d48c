"""build: CREATE INDEX time (median of repeats), index size in pages and device bytes,
and recall@10 at each engine's default knob; Faiss builds on the same vectors."""
import time

from .. import plots, stats
from ..report import Report

COLUMNS = ["engine", "params", "build_s", "build_runs", "index_pages", "index_mb",
           "device_bytes", "knob", "recall"]


# relative build cost, for each engine's share of a --deadline: pgvector's graph and
# k-means builds take minutes where the GPU builds take seconds, and a no-database
# reference's three builds take seconds (at 1M x 128 on an H200: HNSW 83 s a run, IVFFlat
# 24 s, gpuivf 5 s, the five references 1-10 s each with their loads)
COST = {"hnsw": 4.0, "ivfflat": 2.0}
REF_COST = 0.15


def _no_room(ctx, rep, name, secs, r, repeats):
    """Before build run r + 1: True (and a note) when the time the engine's share leaves
    would not hold another run as long as the longest so far; a run cancelled halfway
    would lose the index the recall is measured on."""
    if ctx.out_of_time(rep, f"{name} build run {r + 1} of {repeats}"):
        return True
    if ctx.time_left() < 1.2 * max(secs):
        rep.note(f"{name}: {r} of {repeats} build runs (another of {max(secs):.0f} s would "
                 f"not fit in the {ctx.time_left():.0f} s its --deadline share left)")
        return True
    return False


def _sql_engine(ctx, rep, eng, n):
    o, ds = ctx.opts, ctx.ds
    table, params = eng.table("src"), eng.params(n, o)
    secs, idx = [], None
    for r in range(o.repeats):
        if r and _no_room(ctx, rep, eng.name, secs, r, o.repeats):
            break
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


def _ref_engine(ctx, rep, ref, n):
    o, ds = ctx.opts, ctx.ds
    params = ref.params(n, o)
    ref.threads(o.threads)
    secs = []
    for r in range(o.repeats):
        if r and _no_room(ctx, rep, ref.name, secs, r, o.repeats):
            break
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


def _cli_engine(ctx, rep, ref, n):
    """The Faiss GPU program: one run per repeat, each building the index anew (its
    build_s: train + add) and searching the queries in one batch at the default probes."""
    o, ds = ctx.opts, ctx.ds
    params = ref.params(n, o)
    knob = ref.default_knob(params)
    runs = []
    for r in range(o.repeats):
        if r and ctx.out_of_time(rep, f"{ref.name} build run {r + 1} of {o.repeats}"):
            break
        runs.append(ref.run_sweep(ds, params["lists"], [knob], [len(ds.queries)],
                                  ctx.cluster.dir / "faiss-gpu", repeats=1,
                                  timeout=max(10, min(ref.timeout, ctx.time_left())),
                                  log=ctx.log))
    secs = [run[0]["build_s"] for run in runs]
    ctx.log(f"build {ref.name} {params}: {stats.runs(secs)} s")
    rep.add(engine=ref.name, params=str(params), rows=n, build_s=stats.median(secs),
            build_runs=stats.runs(secs), knob=knob, recall=runs[0][0]["recall10"])
    rep.note(f"{ref.name} = {ref.label}: {ref.binary}; build_s as the program reports it "
             f"(train on 50 rows a list + add, on the GPU)")


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    rep = Report("build", ds.name, ctx.env, vars(o), ctx.notes)
    n = len(ds.base)
    todo = [(eng, _sql_engine) for eng in ctx.sql_engines]
    todo += [(ref, _cli_engine if getattr(ref, "kind", "") == "cli" else _ref_engine)
             for ref in ctx.ref_engines]
    weights = [COST.get(eng.name, 1.0 if fn is _sql_engine else REF_COST) for eng, fn in todo]
    for i, (eng, fn) in enumerate(todo):
        with ctx.share(sum(weights[i:]) / weights[i]):
            if not ctx.out_of_time(rep, f"{eng.name} build"):
                ctx.guarded(rep, eng.name, fn, ctx, rep, eng, n)
    rep.table(f"Index build, {n} rows, median of {o.repeats}", COLUMNS)
    rep.plot(lambda rows, stem: plots.bars(rows, stem, "build_s", "CREATE INDEX / build time",
                                           "seconds"))
    return rep
