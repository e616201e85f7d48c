"""search: QPS against recall@10 while sweeping probes / ef_search, for one client (our
timed loop: latency p50/p99), N clients (pgbench, --clients), and a whole batch in one
round trip (gpuivf_search; a LATERAL join for pgvector; one search call for Faiss)."""
import time

from .. import faissref, plots, ratios, sqlsearch, stats
from ..report import Report

COLUMNS = ["engine", "knob", "seqscan_off", "recall", "qps_1", "p50_ms", "p99_ms"]


def _sql_engine(ctx, rep, eng, clients):
    o, ds = ctx.opts, ctx.ds
    table, params = eng.table("src"), eng.params(len(ds.base), o)
    idx, build_s = ctx.build_index(eng, table, params)
    ctx.log(f"search {eng.name} {params}: index built in {build_s:.1f} s")
    for knob in eng.knob_values(params, o):
        sqlsearch.set_knob(ctx.conn, eng, knob)
        forced = ctx.force_index(eng, table, idx)
        qps, p50, p99, rec = [], [], [], None
        for r in range(o.repeats):
            rec, lat = ctx.recall(eng, table, knob, ds.gt)
            qps.append(len(lat) / sum(lat))
            p50.append(stats.pct(lat, 50) * 1e3)
            p99.append(stats.pct(lat, 99) * 1e3)
        row = dict(engine=eng.name, params=str(params), build_s=build_s,
                   knob=f"{eng.knob}={knob}",
                   knob_value=knob, recall=rec, qps_1=stats.median(qps),
                   qps_1_runs=stats.runs(qps), p50_ms=stats.median(p50),
                   p99_ms=stats.median(p99), seqscan_off=bool(forced))
        for c in clients:
            runs = [sqlsearch.pgbench(ctx.cluster, eng, table, eng.table("q"), ds.metric,
                                      len(ds.queries), c, o.seconds, knob, gucs=forced)
                    for _ in range(o.repeats)]
            row[f"qps_c{c}"] = stats.median(runs)
            row[f"qps_c{c}_runs"] = stats.runs(runs)
        if not o.no_batch:
            secs, brec = [], None
            for r in range(o.repeats):
                sqlsearch.set_knob(ctx.conn, eng, knob)
                found, s = sqlsearch.batch(ctx.conn, eng, idx, table, ds.metric, ds.queries)
                secs.append(s)
                brec = stats.recall_at_k(found, ds.gt)
            row.update(qps_batch=len(ds.queries) / stats.median(secs),
                       batch_s_runs=stats.runs(secs), recall_batch=brec)
        ctx.log(f"  {eng.knob}={knob}: recall {rec:.3f}, 1 client {row['qps_1']:.0f} q/s"
                + "".join(f", {c} clients {row[f'qps_c{c}']:.0f}" for c in clients)
                + (f", batch {row['qps_batch']:.0f}" if "qps_batch" in row else ""))
        rep.add(**row)
    ctx.conn.execute("RESET enable_seqscan")
    if not o.keep_indexes:
        ctx.conn.execute(f"DROP INDEX {idx}")


def _ref_engine(ctx, rep, ref):
    o, ds = ctx.opts, ctx.ds
    params = ref.params(len(ds.base), o)
    ref.threads(o.threads)
    t0 = time.perf_counter()
    index = ref.build(ds.base, ds.metric, params)
    build_s = time.perf_counter() - t0
    for knob in ref.knob_values(params, o):
        ref.set_knob(index, knob)
        qps, p50, p99, bsecs = [], [], [], []
        for r in range(o.repeats):
            ref.threads(1)
            ids, lat = faissref.timed_search(ref, index, ds.queries, 10, ds.metric, True)
            qps.append(len(lat) / sum(lat))
            p50.append(stats.pct(lat, 50) * 1e3)
            p99.append(stats.pct(lat, 99) * 1e3)
            ref.threads(o.threads)
            bids, s = faissref.timed_search(ref, index, ds.queries, 10, ds.metric, False)
            bsecs.append(s)
        rec = stats.recall_at_k(ids, ds.gt)
        ctx.log(f"  {ref.name} knob {knob}: recall {rec:.3f}, 1 thread {stats.median(qps):.0f} q/s")
        rep.add(engine=ref.name, params=str(params), build_s=build_s, knob=knob,
                knob_value=knob, recall=rec,
                qps_1=stats.median(qps), qps_1_runs=stats.runs(qps),
                p50_ms=stats.median(p50), p99_ms=stats.median(p99),
                qps_batch=len(ds.queries) / stats.median(bsecs), batch_s_runs=stats.runs(bsecs),
                recall_batch=stats.recall_at_k(bids, ds.gt))


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    clients = [int(c) for c in o.clients.split(",") if c]
    rep = Report("search", ds.name, ctx.env, vars(o), ctx.notes)
    for eng in ctx.sql_engines:
        _sql_engine(ctx, rep, eng, clients)
    for ref in ctx.ref_engines:
        _ref_engine(ctx, rep, ref)
    cols = COLUMNS + [f"qps_c{c}" for c in clients] + ["qps_batch", "recall_batch"]
    rep.table(f"QPS and recall@10, {len(ds.base)} rows, {len(ds.queries)} queries, "
              f"median of {o.repeats}", cols)
    for col in ["qps_1"] + [f"qps_c{c}" for c in clients] + ["qps_batch"]:
        rows, engines = ratios.at_recall(rep.rows, col)
        if any(len(r) > 2 for r in rows):
            rep.table(f"Best {col} at recall@10 >= target, and ratios",
                      ["recall >="] + engines + [f"gpuivf/{e}" for e in engines if e != "gpuivf"],
                      rows)
    modes = [("qps_1", "1 client (own driver; Faiss: 1 thread, 1 query a call)")]
    modes += [(f"qps_c{c}", f"{c} clients (pgbench)") for c in clients if c != 1]
    modes += [("qps_batch", "batch: all queries in one round trip")]
    rep.plot(lambda rows, stem: plots.recall_qps(rows, stem, modes))
    return rep
