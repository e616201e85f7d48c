"""mutate: single-row latency at N rows: INSERT (autocommit, one row each) and DELETE of
one row followed by VACUUM (INDEX_CLEANUP ON), with recall@10 measured afterwards."""
import random

from .. import db, plots, stats
from ..report import Report

COLUMNS = ["engine", "rows", "insert_p50_ms", "insert_p99_ms", "delete_p50_ms",
           "vacuum_p50_s", "vacuum_p99_s", "recall_after", "build_s", "index_pages",
           "device_bytes"]


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    n = min(o.rows or len(ds.base), len(ds.base))
    m, dv = o.inserts, o.deletes
    rep = Report("mutate", ds.name, ctx.env, vars(o), ctx.notes)
    rep.note(f"{n} rows; {m} single-row INSERTs, {dv} single-row DELETE + "
             f"VACUUM (INDEX_CLEANUP ON)")
    for i, eng in enumerate(ctx.sql_engines):
        with ctx.share(len(ctx.sql_engines) - i):
            if not ctx.out_of_time(rep, f"{eng.name}", reserve=10):
                ctx.guarded(rep, eng.name, _engine, ctx, rep, eng, n, m, dv)
    rep.table("Single-row mutation latency", COLUMNS)
    rep.plot(lambda rows, stem: plots.bars(rows, stem, "vacuum_p50_s",
                                           "VACUUM after a 1-row DELETE (p50)", "seconds"))
    return rep


def _engine(ctx, rep, eng, n, m, dv):
    o = ctx.opts
    table = f"mut_{eng.suffix}"
    ctx.copy_table(eng, table, n - m)
    params = eng.params(n, o)
    idx, build_s = ctx.build_index(eng, table, params)
    ctx.log(f"mutate {eng.name} {params}: {n - m} rows, built in {build_s:.1f} s")
    ins = [db.timed(ctx.conn, f"INSERT INTO {table} SELECT id, embedding FROM "
                    f"{eng.table('src')} WHERE id = %s", (n - m + i,)) for i in range(m)]
    rng = random.Random(1)
    dels, vacs, gone = [], [], set()
    for _ in range(dv):
        victim = rng.randrange(n)
        gone.add(victim)
        dels.append(db.timed(ctx.conn, f"DELETE FROM {table} WHERE id = %s", (victim,)))
        vacs.append(db.timed(ctx.conn, f"VACUUM (INDEX_CLEANUP ON) {table}"))
    knob = eng.default_knob(params)
    rec, _ = ctx.recall(eng, table, knob, _truth(ctx, n, gone))
    row = rep.add(engine=eng.name, params=str(params), rows=n, build_s=build_s,
                  knob=f"{eng.knob}={knob}",
                  insert_p50_ms=stats.pct(ins, 50) * 1e3,
                  insert_p99_ms=stats.pct(ins, 99) * 1e3,
                  delete_p50_ms=stats.pct(dels, 50) * 1e3,
                  vacuum_p50_s=stats.pct(vacs, 50), vacuum_p99_s=stats.pct(vacs, 99),
                  delete_vacuum_p50_s=stats.pct([a + b for a, b in zip(dels, vacs)], 50),
                  recall_after=rec, **ctx.index_size(idx))
    ctx.log(f"  insert p50 {row['insert_p50_ms']:.2f} ms, delete+vacuum p50 "
            f"{row['delete_vacuum_p50_s']:.3f} s, recall {rec:.3f}")
    ctx.conn.execute(f"DROP TABLE {table}")


def _truth(ctx, n, gone):
    """Exact top-10 over the rows left: ids 0..n-1 less the deleted ones."""
    import numpy as np
    from ..groundtruth import exact_knn
    keep = np.setdiff1d(np.arange(n), np.fromiter(gone, dtype=np.int64))
    return exact_knn(ctx.ds.base[keep], ctx.ds.queries, 10, ctx.ds.metric, ids=keep)
