"""batchcost: what one batch statement costs apart from the scan.  A seeded 8-d table of
1,000 rows with 4 lists (probes 1) keeps the scan negligible, so that the time of a batch
of nq queries at k 1 and k 10 shows the statement's fixed cost and each hit's (heap
fetch, visibility check, result row); each batch is timed with its rows counted on the
server and with them sent to the client.  The search scenario's batch_ms minus this
leaves the scan itself (on a GPU host: the device service's and the CUDA backend's part).
gpuivf's form is gpuivf_search_packed (the key column), pgvector's the LATERAL join."""
import numpy as np

from .. import db, plots, sqlsearch, stats
from ..engines import batch_param
from ..report import Report

COLUMNS = ["engine", "nq", "k", "hits", "server_ms", "sent_ms", "server_us_per_query",
           "rows_ms"]
DIM, ROWS, LISTS, NQ = 8, 1000, 4, (1, 10, 100, 300, 1000)


def run(ctx):
    o = ctx.opts
    rep = Report("batchcost", f"tiny-{ROWS}-{DIM}", ctx.env, vars(o), ctx.notes)
    reps = max(15, 5 * o.repeats)
    rep.note(f"{ROWS} rows of {DIM} dimensions (seeded N(0,1)), {LISTS} lists (HNSW: its "
             f"defaults), probes 1 / ef_search 40, l2; medians of {reps} runs of each "
             f"statement (each the second of two back to back), server and sent forms "
             f"interleaved")
    for i, eng in enumerate(ctx.sql_engines):
        with ctx.share(len(ctx.sql_engines) - i):
            if not ctx.out_of_time(rep, eng.name, reserve=5):
                ctx.guarded(rep, eng.name, _engine, ctx, rep, eng, reps)
    rep.table("Batch statement cost with a negligible scan", COLUMNS)
    rep.plot(lambda rows, stem: plots.lines(
        rows, stem, "nq", "server_ms", lambda r: f"{r['engine']}, k {r['k']}",
        "batch statement, rows counted on the server", "queries in the batch", "ms"))
    return rep


def _engine(ctx, rep, eng, reps):
    rng = np.random.default_rng(5)
    table = f"bc_{eng.suffix}"
    ctx.conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    ctx.conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding "
                     f"{eng.column_type(DIM)}) WITH (autovacuum_enabled = off)")
    db.copy_vectors(ctx.conn, table, np.arange(ROWS), rng.standard_normal((ROWS, DIM),
                                                                           dtype=np.float32),
                    eng.coltype)
    params = {"lists": LISTS} if eng.am != "hnsw" else {"m": 16, "ef_construction": 64}
    idx = f"{table}_idx"
    ctx.conn.execute(eng.create_index(idx, table, "l2", params))
    ctx.conn.execute(f"ANALYZE {table}")
    ctx.conn.execute(f"SET {eng.knob} = {40 if eng.am == 'hnsw' else 1}")
    ctx.conn.execute("SET enable_seqscan = off")
    sent_sql = eng.batch_sql(idx, table, "l2")
    server_sql = sqlsearch.batch_counted_sql(eng, idx, table, "l2")
    for nq in NQ:
        if ctx.out_of_time(rep, f"{eng.name} at {nq} queries and above"):
            break
        param = batch_param(rng.standard_normal((nq, DIM), dtype=np.float32), eng.coltype)
        for k in (1, 10):
            server, sent, hits = [], [], 0
            for _ in range(reps):
                s, rows = sqlsearch.timed_warm(ctx.conn, server_sql, (param, k))
                server.append(s)
                hits = rows[0][0]
                sent.append(sqlsearch.timed_warm(ctx.conn, sent_sql, (param, k))[0])
            sm, tm = stats.median(server) * 1e3, stats.median(sent) * 1e3
            ctx.log(f"  {eng.name} nq {nq} k {k}: {hits} hits, server {sm:.3f} ms, "
                    f"sent {tm:.3f} ms")
            rep.add(engine=eng.name, nq=nq, k=k, hits=hits, server_ms=sm, sent_ms=tm,
                    server_us_per_query=sm * 1e3 / nq, rows_ms=tm - sm,
                    server_runs=stats.runs(server), sent_runs=stats.runs(sent))
    ctx.conn.execute("RESET enable_seqscan")
    ctx.conn.execute(f"RESET {eng.knob}")
    ctx.conn.execute(f"DROP TABLE {table}")
