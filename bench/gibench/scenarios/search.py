"""search: QPS against recall@10 while sweeping probes / ef_search, for one client (our
timed loop: latency p50/p99), N clients (pgbench, --clients), and a whole batch in one
round trip (gpuivf_search; a LATERAL join for pgvector; one search call for Faiss)."""
import time

from .. import faissref, plots, ratios, sqlsearch, stats
from ..report import Report

PRIORITY = {"gpuivf": 0, "faiss-gpu-ivf": 1, "faiss-gpu-wheel": 1.2, "cuvs-ivf": 1.5,
            "cuvs-cagra": 1.6}
COLUMNS = ["engine", "knob", "seqscan_off", "recall", "qps_1", "p50_ms", "p99_ms"]
BATCH_SPLIT_MAX_S = 0.5


def _sql_engine(ctx, rep, eng, clients):
    o, ds = ctx.opts, ctx.ds
    table, params = eng.table("src"), eng.params(len(ds.base), o)
    idx, build_s = ctx.build_index(eng, table, params)
    ctx.log(f"search {eng.name} {params}: index built in {build_s:.1f} s")
    for knob in eng.knob_values(params, o):
        if ctx.out_of_time(rep, f"{eng.name} at {eng.knob}={knob} and above"):
            break
        sqlsearch.set_knob(ctx.conn, eng, knob)
        forced = ctx.force_index(eng, table, idx)
        ours = eng.am == "gpuivf"
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
            runs, use = [], []
            for _ in range(o.repeats):
                use.append({})
                svc = sqlsearch.service_counters(ctx.conn) if ours else None
                t0 = time.perf_counter()
                runs.append(sqlsearch.pgbench(ctx.cluster, eng, table, eng.table("q"),
                                              ds.metric, len(ds.queries), c, o.seconds, knob,
                                              gucs=forced, cpu=use[-1]))
                if svc is not None:
                    use[-1].update(sqlsearch.service_use(
                        svc, sqlsearch.service_counters(ctx.conn), time.perf_counter() - t0))
            row[f"qps_c{c}"] = stats.median(runs)
            row[f"qps_c{c}_runs"] = stats.runs(runs)
            # where the clients' rate stops: cores of the machine, of the device
            # service and of pgbench kept busy
            for part in ("cores", "service", "client"):
                row[f"cpu_{part}_c{c}"] = stats.median([u[part] for u in use])
            # and of the service's thread: shares of the time in rounds and in the
            # compute backend's searches, requests a round
            for part in ("svc_round", "svc_search", "svc_batch"):
                if all(part in u for u in use):
                    row[f"{part}_c{c}"] = stats.median([u[part] for u in use])
        if not o.no_batch:
            secs, warm, server, brec = [], [], [], None
            for r in range(o.repeats):
                sqlsearch.set_knob(ctx.conn, eng, knob)
                found, s = sqlsearch.batch(ctx.conn, eng, idx, table, ds.metric, ds.queries)
                secs.append(s)
                brec = stats.recall_at_k(found, ds.gt)
                # the split into server and client time matters where the statement is
                # short; pgvector's slow batches (seconds) would only eat the deadline
                if s < BATCH_SPLIT_MAX_S:
                    w, c = sqlsearch.batch_split(ctx.conn, eng, idx, table, ds.metric,
                                                 ds.queries)
                    warm.append(w)
                    server.append(c)
            row.update(qps_batch=len(ds.queries) / stats.median(secs),
                       batch_s_runs=stats.runs(secs), recall_batch=brec,
                       batch_ms=stats.median(secs) * 1e3,
                       batch_warm_ms=stats.median(warm) * 1e3 if warm else None,
                       batch_server_ms=stats.median(server) * 1e3 if server else None)
        ctx.log(f"  {eng.knob}={knob}: recall {rec:.3f}, 1 client {row['qps_1']:.0f} q/s"
                + "".join(f", {c} clients {row[f'qps_c{c}']:.0f} (cores busy "
                          f"{row[f'cpu_cores_c{c}']:.1f}, service {row[f'cpu_service_c{c}']:.2f},"
                          f" pgbench {row[f'cpu_client_c{c}']:.2f}"
                          + (f"; service in rounds {row[f'svc_round_c{c}']:.2f}, in searches "
                             f"{row[f'svc_search_c{c}']:.2f}, {row[f'svc_batch_c{c}']:.1f} "
                             f"requests a round" if f"svc_round_c{c}" in row else "")
                          + ")" for c in clients)
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
        if ctx.out_of_time(rep, f"{ref.name} at knob {knob} and above"):
            break
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


def _cli_engine(ctx, rep, ref):
    """A no-database program that sweeps by itself (Faiss GPU IVF-Flat) on the same
    vectors, queries and ground truth; it takes the median of max(3, --repeats) passes."""
    o, ds = ctx.opts, ctx.ds
    params = ref.params(len(ds.base), o)
    nq = len(ds.queries)
    batches = [1] + ([nq] if nq > 1 and not o.no_batch else [])
    passes = max(3, o.repeats)
    rows = ref.run_sweep(ds, params["lists"], ref.knob_values(params, o), batches,
                         ctx.cluster.dir / "faiss-gpu", repeats=passes,
                         timeout=max(10, min(ref.timeout, ctx.time_left())), log=ctx.log)
    for row in ref.sweep_rows(rows, params, nq, passes):
        ctx.log(f"  {ref.name} probes {row['knob']}: recall {row.get('recall', float('nan')):.3f}"
                f", 1 query a call {row.get('qps_1') or 0:.0f} q/s, "
                f"batch {row.get('qps_batch') or 0:.0f}")
        rep.add(**row)
    rep.note(f"{ref.name} = {ref.label}: {ref.binary} (median of {passes} passes; "
             f"1 client = one query a call, batch = all {nq} queries in one call)")


def run(ctx):
    o, ds = ctx.opts, ctx.ds
    clients = [int(c) for c in o.clients.split(",") if c]
    rep = Report("search", ds.name, ctx.env, vars(o), ctx.notes)
    todo = [(eng, _sql_engine, (clients,)) for eng in ctx.sql_engines]
    todo += [(ref, _cli_engine if getattr(ref, "kind", "") == "cli" else _ref_engine, ())
             for ref in ctx.ref_engines]
    # ours first, then the GPU reference, then the other peers (what a --deadline cuts
    # first comes last)
    todo.sort(key=lambda t: PRIORITY.get(t[0].name, 2 if t[1] is _sql_engine else 3))
    # under --deadline each engine gets a share of the time left, by weight: a SQL
    # engine's sweep (pgbench at every point) costs about three times a reference's, and
    # ours gets half as much again as a peer
    weights = [(1.5 if eng.name == "gpuivf" else 1.0) if fn is _sql_engine else 0.35
               for eng, fn, _ in todo]
    for i, (eng, fn, args) in enumerate(todo):
        with ctx.share(sum(weights[i:]) / weights[i]):
            if not ctx.out_of_time(rep, f"{eng.name} (whole sweep)", reserve=10):
                ctx.guarded(rep, eng.name, fn, ctx, rep, eng, *args)
        if i < len(todo) - 1 and rep.rows:
            rep.checkpoint(lambda r: _finish(ctx, r, clients), eng.name)
    _finish(ctx, rep, clients)
    return rep


def _finish(ctx, rep, clients):
    o, ds = ctx.opts, ctx.ds
    cols = COLUMNS + [f"qps_c{c}" for c in clients] + ["qps_batch", "recall_batch",
                                                       "batch_ms", "batch_warm_ms",
                                                       "batch_server_ms"]
    for r in rep.rows:          # the references' batch: one call, no rows to send
        if r.get("qps_batch") and not r.get("batch_ms"):
            r["batch_ms"] = len(ds.queries) / r["qps_batch"] * 1e3
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
