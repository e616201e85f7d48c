"""orient: the issue's orientation figures, reproduced on our data before comparing
anything: HNSW (m=16, ef_construction=64) at ef_search=80, IVFFlat (lists=sqrt(N)) at
probes=32, gpuivf alike; build time, one-client recall@10 and QPS; then R rounds of
deleting K rows + VACUUM (INDEX_CLEANUP ON) and putting them back with INSERT ... SELECT."""
import random

from .. import db, plots, sqlsearch, stats
from ..report import Report

COLUMNS = ["engine", "params", "knob", "build_s", "recall", "qps_1", "qps_c1",
           "delete_vacuum_s", "insert_select_s", "recall_after", "index_pages"]


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    n, k_rows = len(ds.base), o.batch
    rep = Report("orient", ds.name, ctx.env, vars(o), ctx.notes)
    rep.note(f"{n} rows, {len(ds.queries)} queries; build and search medians of {o.repeats} "
             f"runs; {o.mutation_repeats} rounds of DELETE {k_rows} rows + VACUUM "
             f"(INDEX_CLEANUP ON), then INSERT ... SELECT of the same rows")
    rng = random.Random(5)
    for eng in ctx.sql_engines:
        table = f"orient_{eng.suffix}"
        ctx.copy_table(eng, table)
        params = eng.params(n, o)
        builds = []
        for r in range(o.repeats):
            idx, s = ctx.build_index(eng, table, params)
            builds.append(s)
            ctx.log(f"orient {eng.name} {params}: build {s:.1f} s")
        knob = o.knob or eng.default_knob(params)
        qps, rec = [], None
        for r in range(o.repeats):
            rec, lat = ctx.recall(eng, table, knob, ds.gt)
            qps.append(len(lat) / sum(lat))
        pgb = [sqlsearch.pgbench(ctx.cluster, eng, table, eng.table("q"), ds.metric,
                                 len(ds.queries), 1, o.seconds, knob) for _ in range(o.repeats)]
        ctx.log(f"  {eng.knob}={knob}: recall {rec:.3f}, {stats.median(qps):.0f} q/s "
                f"(pgbench {stats.median(pgb):.0f})")
        dv, ins = [], []
        for r in range(o.mutation_repeats):
            lo = rng.randrange(0, n - k_rows)
            dv.append(db.timed(ctx.conn, f"DELETE FROM {table} WHERE id >= %s AND id < %s",
                               (lo, lo + k_rows)) +
                      db.timed(ctx.conn, f"VACUUM (INDEX_CLEANUP ON) {table}"))
            ins.append(db.timed(ctx.conn, f"INSERT INTO {table} SELECT id, embedding FROM "
                                f"{eng.table('src')} WHERE id >= %s AND id < %s",
                                (lo, lo + k_rows)))
            ctx.log(f"  delete {k_rows} + vacuum {dv[-1]:.2f} s, insert {ins[-1]:.2f} s")
        rec_after, _ = ctx.recall(eng, table, knob, ds.gt)
        rep.add(engine=eng.name, params=str(params), rows=n, knob=f"{eng.knob}={knob}",
                build_s=stats.median(builds), build_runs=stats.runs(builds), recall=rec,
                qps_1=stats.median(qps), qps_1_runs=stats.runs(qps), qps_c1=stats.median(pgb),
                qps_c1_runs=stats.runs(pgb), delete_vacuum_s=stats.median(dv),
                delete_vacuum_runs=stats.runs(dv), insert_select_s=stats.median(ins),
                insert_select_runs=stats.runs(ins), recall_after=rec_after, **ctx.index_size(idx))
        ctx.conn.execute(f"DROP TABLE {table}")
    rep.table("Orientation figures (one client)", COLUMNS)
    rep.plot(lambda rows, stem: plots.bars(rows, stem, "delete_vacuum_s",
                                           f"DELETE {k_rows} rows + VACUUM (INDEX_CLEANUP ON)",
                                           "seconds"))
    return rep
