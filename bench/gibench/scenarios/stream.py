"""stream: the SIVF sliding window in SQL.  A table holds a window of W rows with the
index; each step inserts the next B rows (INSERT ... SELECT from the loaded data),
deletes the oldest B, runs VACUUM (INDEX_CLEANUP ON) (plain VACUUM may skip index
cleanup), then S single-client searches checked against the exact answer over the
window.  Per step: each phase's time, search p50/p99, recall@10, index size."""
from .. import db, plots, sqlsearch, stats
from ..context import exact_subset
from ..report import Report

SUMMARY = ["engine", "steps", "insert_p50_s", "insert_p99_s", "delete_p50_s", "delete_p99_s",
           "vacuum_p50_s", "vacuum_p99_s", "step_p50_s", "search_p50_ms", "search_p99_ms",
           "recall_mean", "pages_first", "pages_last", "device_bytes_first",
           "device_bytes_last"]


def _engine(ctx, rep, eng, w, b, steps, nsearch):
    o, ds = ctx.opts, ctx.ds
    table = f"win_{eng.suffix}"
    ctx.copy_table(eng, table, w)
    params = eng.params(w, o)
    idx, build_s = ctx.build_index(eng, table, params)
    knob = o.knob or eng.default_knob(params)
    sqlsearch.set_knob(ctx.conn, eng, knob)
    queries = ds.queries[:nsearch]
    ctx.log(f"stream {eng.name} {params} {eng.knob}={knob}: window {w}, built in {build_s:.1f} s")
    rows = []
    for s in range(steps):
        if s and ctx.out_of_time(rep, f"{eng.name} steps {s + 1} to {steps}"):
            break
        lo = s * b
        ins = db.timed(ctx.conn, f"INSERT INTO {table} SELECT id, embedding FROM "
                       f"{eng.table('src')} WHERE id >= %s AND id < %s", (w + lo, w + lo + b))
        dele = db.timed(ctx.conn, f"DELETE FROM {table} WHERE id >= %s AND id < %s", (lo, lo + b))
        vac = db.timed(ctx.conn, f"VACUUM (INDEX_CLEANUP ON) {table}")
        found, lat = sqlsearch.single_client(ctx.conn, eng, table, ds.metric, queries, warmup=0)
        truth = exact_subset(ds, lo + b, w + lo + b, queries)
        size = ctx.index_size(idx)
        row = rep.add(engine=eng.name, step=s + 1, insert_s=ins, delete_s=dele, vacuum_s=vac,
                      step_s=ins + dele + vac + sum(lat),
                      search_p50_ms=stats.pct(lat, 50) * 1e3,
                      search_p99_ms=stats.pct(lat, 99) * 1e3,
                      recall=stats.recall_at_k(found, truth),
                      device_mb=size["device_bytes"] / 2**20 if size["device_bytes"] else None,
                      **size)
        rows.append(row)
        ctx.log(f"  step {s + 1}: insert {ins:.3f} s, delete {dele:.3f} s, vacuum {vac:.3f} s, "
                f"search p50 {row['search_p50_ms']:.2f} ms, recall {row['recall']:.3f}, "
                f"{size['index_pages']} pages")
    ctx.conn.execute(f"DROP TABLE {table}")

    def col(c):
        return [r[c] for r in rows]
    lat_all = [r["search_p50_ms"] for r in rows]
    return dict(engine=eng.name, params=str(params), knob=f"{eng.knob}={knob}", steps=len(rows),
                insert_p50_s=stats.pct(col("insert_s"), 50),
                insert_p99_s=stats.pct(col("insert_s"), 99),
                delete_p50_s=stats.pct(col("delete_s"), 50),
                delete_p99_s=stats.pct(col("delete_s"), 99),
                vacuum_p50_s=stats.pct(col("vacuum_s"), 50),
                vacuum_p99_s=stats.pct(col("vacuum_s"), 99),
                step_p50_s=stats.pct(col("step_s"), 50),
                search_p50_ms=stats.median(lat_all),
                search_p99_ms=stats.pct(col("search_p99_ms"), 50),
                recall_mean=sum(col("recall")) / len(rows),
                pages_first=rows[0]["index_pages"], pages_last=rows[-1]["index_pages"],
                device_bytes_first=rows[0]["device_bytes"],
                device_bytes_last=rows[-1]["device_bytes"])


def panels(b):
    return [("insert_s", f"INSERT {b} rows (s)", True),
            ("vacuum_s", "VACUUM after the DELETE (s)", True),
            ("search_p50_ms", "search p50 (ms)", True), ("recall", "recall@10", False),
            ("index_pages", "index size (pages)", False),
            ("device_mb", "device store (MB, gpuindex_stats)", False)]


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    w, b, steps, nsearch = o.window, o.batch, o.steps, o.searches
    need = w + steps * b
    if len(ds.base) < need:
        raise SystemExit(f"stream needs {need} rows (W + steps*B), dataset has {len(ds.base)}")
    rep = Report("stream", ds.name, ctx.env, vars(o), ctx.notes)
    rep.note(f"window W = {w}, batch B = {b}, {steps} steps, {nsearch} searches a step "
             f"(the issue's full setting is W = 200000, B = 10000, 50 steps)")
    summary = []

    def finish(r):
        r.table("Per-phase latency over the steps (p50/p99 across steps; search p50 = median "
                "of per-step p50, search p99 = median of per-step p99)", SUMMARY, summary)
        r.plot(lambda rows, stem: plots.per_step(rows, stem, panels(b)))
    for i, eng in enumerate(ctx.sql_engines):
        with ctx.share(len(ctx.sql_engines) - i):
            if not ctx.out_of_time(rep, f"{eng.name} (all steps)", reserve=10):
                one = ctx.guarded(rep, eng.name, _engine, ctx, rep, eng, w, b, steps, nsearch)
                if one:
                    summary.append(one)
        if i < len(ctx.sql_engines) - 1 and rep.rows:
            rep.checkpoint(finish, eng.name)
    finish(rep)
    return rep
