"""gpusparse benchmark: exact top-10 by inner product over `spvec`, against every peer in
one run, on one private PostgreSQL cluster.

Engines (--engines, in this order):
  scipy      exact CPU reference, no database: q @ D^T (scipy sparse) + argpartition,
             one query a call and the whole batch in one call (single-threaded scipy)
  seismic    Seismic (pyseismic-lsr, CPU, approximate): build, then per search setting
             one query a call (search) and the batch (batch_search, all cores)
  torch      exact GPU reference, no database (bench/sparse/torch_ref.py): only where
             torch sees a CUDA device, otherwise reported as skipped
  gpusparse  CREATE INDEX ... USING gpusparse; 1 client: prepared
             `SELECT id FROM d ORDER BY v <#> $1 LIMIT 10` (index forced), p50/p99;
             batch: gpusparse_search_packed(index, queries, 10, 'id', NULL::bigint)
  seqscan    the same statement with index scans off, on --seqscan-queries queries:
             `seqscan` with the server's parallel settings as they are,
             `seqscan-serial` with max_parallel_workers_per_gather = 0
  hnsw       pgvector sparsevec HNSW (m 16, ef_construction 64, sparsevec_ip_ops) on a
             copy of the table; 1 client over a sweep of hnsw.ef_search (approximate)
  updates    DELETE of --deletes random rows + VACUUM (INDEX_CLEANUP ON) with the
             gpusparse index (its dead-row log as created, then vacuum_log_limit 0:
             pages changed at every VACUUM), then with a btree on id alone (what any
             index costs), then on the table without any index (the heap's own vacuum
             time), medians and means of --update-rounds rounds (rows re-inserted
             between rounds; the means include the rounds that empty the log)

Recall@10 is score-aware against the exact answer (scipy, float64): a returned id counts
when its exact score reaches the reference's 10th score (within 1e-5 relative), so equal
scores at the cut-off are not misses; `exact_share` is the share of queries whose 10
rows all count. Output: docs/benchmarks/sparse-DATASET[-TAG].{csv,md,png}.

    bash bench/sparse/run.sh --dataset bm25-debian            # prepares, then runs this
"""
import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np
from psycopg import sql as psql

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from gibench import db, environment, plots  # noqa: E402
from gibench.cluster import Cluster  # noqa: E402
from gibench.report import Report  # noqa: E402
from gibench.stats import median, pct  # noqa: E402

import seismic_peer  # noqa: E402
import sparsedata  # noqa: E402
import torch_ref  # noqa: E402

K = sparsedata.K
ENGINES = ["scipy", "seismic", "torch", "gpusparse", "seqscan", "hnsw", "updates"]
LABELS = {
    "gpusparse": "gpusparse (exact)",
    "seqscan": "sequential scan (exact)",
    "seqscan-serial": "sequential scan, no parallel workers (exact)",
    "hnsw": "pgvector sparsevec HNSW (approximate)",
    "scipy-cpu": "scipy sparse (exact, no database)",
    "torch-gpu": "torch sparse on the GPU (exact, no database)",
}
plots.STYLE.update({"gpusparse": ("tab:red", "o"), "seqscan": ("tab:gray", "s"),
                    "seqscan-serial": ("silver", "s"), "hnsw": ("tab:green", "^"),
                    "scipy-cpu": ("tab:blue", "D"),
                    "torch-gpu": ("tab:orange", "P")})
plots.LABELS.update(LABELS)


def log(msg):
    print(msg, flush=True)


class Budget:
    def __init__(self, seconds):
        self.t0, self.seconds = time.time(), seconds

    def left(self):
        return float("inf") if not self.seconds else self.seconds - (time.time() - self.t0)

    def ok(self, need=0.0):
        return self.left() > need


def qps_row(engine, setting, n, passes, lat=None, **extra):
    """A result row from pass times (seconds) and per-query latencies."""
    row = {"engine": engine, "setting": setting, "nq": n,
           "qps": n / median(passes) if passes else None,
           "qps_runs": ";".join(f"{n / p:.4g}" for p in passes)}
    if lat:
        row["p50_ms"] = pct(lat, 50) * 1e3
        row["p99_ms"] = pct(lat, 99) * 1e3
    row.update(extra)
    return row


# ------------------------------------------------------------------ engines without a database

def run_scipy(ds, judge, a, rep, budget):
    import scipy.sparse as sp  # noqa: F401
    t0 = time.perf_counter()
    if len(ds.blocks) == 1:
        dts = [(0, ds.blocks[0][1].T.tocsr())]
    else:
        dts = [(o, b.T.tocsr()) for o, b in ds.blocks]
    prep = time.perf_counter() - t0
    q = ds.queries
    n = q.shape[0]
    qrows = [q[i] for i in range(n)]

    def top(scores, off):
        kk = min(K, scores.shape[-1])
        p = np.argpartition(-scores, kk - 1, axis=-1)[..., :kk]
        return p + off, np.take_along_axis(scores, p, -1)

    def one(i):
        best_i, best_s = None, None
        for off, dt in dts:
            s = (qrows[i] @ dt).toarray().ravel()
            ii, ss = top(s, off)
            if best_i is None:
                best_i, best_s = ii, ss
            else:
                ai, as_ = np.concatenate([best_i, ii]), np.concatenate([best_s, ss])
                o = np.argsort(-as_)[:K]
                best_i, best_s = ai[o], as_[o]
        o = np.argsort(-best_s)
        return best_i[o]

    passes, lat, found = [], [], None
    nsingle = n if len(ds.blocks) == 1 else min(n, a.scipy_single_nq)
    for r in range(a.repeats):
        if not budget.ok(30):
            rep.note("scipy: deadline reached, fewer single-query passes")
            break
        t = time.perf_counter()
        res = []
        for i in range(nsingle):
            s0 = time.perf_counter()
            res.append(one(i))
            lat.append(time.perf_counter() - s0)
        passes.append(time.perf_counter() - t)
        found = res
    rec, exact, _ = judge.judge(found) if found else (None, None, None)
    # the batch: Q @ D^T in one product, top-k per row (in row chunks: a dense row of N)
    bpasses = []
    for r in range(a.repeats):
        if not budget.ok(30):
            break
        t = time.perf_counter()
        allb = []
        for off, dt in dts:
            ids = np.zeros((n, K), dtype=np.int64)
            scs = np.zeros((n, K))
            for s in range(0, n, 100):
                dense = (q[s:s + 100] @ dt).toarray()
                ii, ss = top(dense, off)
                ids[s:s + 100], scs[s:s + 100] = ii, ss
            allb.append((ids, scs))
        bpasses.append(time.perf_counter() - t)
    row = qps_row("scipy-cpu", "q @ D^T, argpartition", nsingle, passes, lat,
                  exact_method="yes", recall=rec, exact_share=exact, build_s=prep,
                  batch_qps=n / median(bpasses) if bpasses else None,
                  batch_ms=median(bpasses) * 1e3 if bpasses else None,
                  batch_runs=";".join(f"{x:.4g}" for x in bpasses))
    rep.add(**row)
    log(f"bench: scipy: {row['qps']:.0f} QPS one query a call, "
        f"{row['batch_qps'] or 0:.0f} QPS batch; recall {rec}")


def seismic_python():
    """The interpreter that runs Seismic: this one, else BENCH_SEISMIC_PYTHON, else None."""
    try:
        import seismic  # noqa: F401
        return sys.executable
    except ImportError:
        other = os.environ.get("BENCH_SEISMIC_PYTHON")
        if other and subprocess.run([other, "-c", "import numpy, seismic"],
                                    capture_output=True).returncode == 0:
            return other
        return None


def run_seismic(ds, judge, a, rep, budget):
    py = seismic_python()
    if py is None:
        why = "pyseismic-lsr imports neither here nor under BENCH_SEISMIC_PYTHON"
        rep.add(engine="seismic-1", setting="skipped", exact_method="no (approximate)", notes=why)
        rep.note(f"seismic skipped: {why}")
        log(f"bench: seismic skipped: {why}")
        return
    seconds = max(1.0, budget.left()) if budget.seconds else 0
    if py == sys.executable:
        res = seismic_peer.measure([(o, b.indptr, b.indices, b.data) for o, b in ds.blocks],
                                   ds.dim, (ds.queries.indptr, ds.queries.indices, ds.queries.data),
                                   a.seismic_builds, a.seismic_search, a.repeats, K, seconds, log)
    else:
        # its only wheel may be for another Python: the collection goes over in a file
        with tempfile.TemporaryDirectory(prefix="gpuindex-seismic-") as tmp:
            data, spec, outp = (os.path.join(tmp, f) for f in ("data.npz", "spec.json", "out.json"))
            t0 = time.perf_counter()
            seismic_peer.save_input(data, ds.blocks, ds.queries, ds.dim)
            log(f"bench: seismic runs under {py}; collection saved in "
                f"{time.perf_counter() - t0:.1f} s")
            with open(spec, "w") as f:
                json.dump({"builds": a.seismic_builds, "searches": a.seismic_search,
                           "repeats": a.repeats, "k": K, "seconds": seconds}, f)
            r = subprocess.run([py, os.path.join(HERE, "seismic_peer.py"), data, spec, outp])
            if r.returncode != 0 or not os.path.exists(outp):
                rep.note(f"seismic under {py} failed (exit {r.returncode})")
                return
            with open(outp) as f:
                res = json.load(f)
    rep.env["pyseismic_lsr"] = res["version"] + ("" if py == sys.executable else f" ({py})")
    for note in res["notes"]:
        rep.note(note)
    for run in res["runs"]:
        eng = f"seismic-{run['build']}"
        bi = run["build"] - 1
        plots.STYLE[eng] = (["tab:purple", "tab:pink", "tab:brown", "tab:olive"][bi % 4],
                            "v<>"[bi % 3])
        plots.LABELS[eng] = f"{eng} (Seismic build {run['build']}, approximate, no database)"
        npost, cf, se, mf = run["spec"].split(":")
        n = ds.queries.shape[0]
        for st in run["settings"]:
            qc, hf = st["query_cut"], st["heap_factor"]
            rec, exact, _ = judge.judge(st["found"])
            brec, _, _ = judge.judge(st["bfound"])
            bp = st["bpasses"]
            row = qps_row(eng, f"n_postings {npost}, cf {cf}, se {se}, mf {mf}; "
                          f"query_cut {qc}, heap_factor {hf}", n, st["passes"], st["lat"],
                          knob="heap_factor", knob_value=hf, exact_method="no (approximate)",
                          recall=rec, exact_share=exact, batch_recall=brec, build_s=run["build_s"],
                          batch_qps=n / median(bp), batch_ms=median(bp) * 1e3,
                          batch_runs=";".join(f"{x:.4g}" for x in bp))
            rep.add(**row)
            log(f"bench: {eng} qc {qc} hf {hf}: {row['qps']:.0f} QPS, batch "
                f"{row['batch_qps']:.0f}; recall {rec:.4f}")


def run_torch(ds, judge, a, rep, budget):
    ok, why = torch_ref.available()
    if not ok:
        rep.add(engine="torch-gpu", setting="skipped", exact_method="yes", notes=why)
        rep.note(f"torch-gpu (exact GPU reference, bench/sparse/torch_ref.py) skipped: {why}")
        log(f"bench: torch-gpu skipped: {why}")
        return
    rows, why = torch_ref.run([(o, b) for o, b in ds.blocks], ds.queries, ds.dim,
                              [int(x) for x in a.torch_batches.split(",")], a.repeats,
                              judge=lambda f, returned_scores=None: judge.judge(
                                  f, returned_scores=returned_scores), log=log)
    for r in rows:
        r["setting"] = f"{r['setting']} ({why})"
        rep.add(**r)


# ------------------------------------------------------------------ the database engines

SEARCH = "SELECT id FROM {t} ORDER BY v <#> %s::{ty} LIMIT 10"


def one_client(conn, sql, lits, repeats, budget, warm=20):
    cur = conn.cursor()
    for lit in lits[:warm]:
        cur.execute(sql, (lit,), prepare=True)
        cur.fetchall()
    passes, lat, found = [], [], None
    for r in range(repeats):
        if r and not budget.ok(10):
            break
        res = []
        t = time.perf_counter()
        for lit in lits:
            s0 = time.perf_counter()
            cur.execute(sql, (lit,), prepare=True)
            rows = cur.fetchall()
            lat.append(time.perf_counter() - s0)
            res.append([x[0] for x in rows])
        passes.append(time.perf_counter() - t)
        found = res
    return passes, lat, found


def plan(conn, sql, lit):
    """EXPLAIN of the statement with one query, the query's literal shortened."""
    rows = conn.execute("EXPLAIN (COSTS OFF) " + sql, (lit,)).fetchall()
    return re.sub(r"'\{[^']*\}/(\d+)'", r"'{...}/\1'", " / ".join(r[0].strip() for r in rows))


def relsize_mb(conn, rel):
    return db.scalar(conn, "SELECT pg_relation_size(%s::regclass)", (rel,)) / 2**20


def run_gpusparse(cl, ds, judge, lits, a, rep, budget, state):
    conn = db.connect(cl, jit="off")
    if state.get("kept_index"):
        build = float("nan")
        log("bench: gpusparse index kept from an earlier run (--reuse): no build time")
    else:
        conn.execute("CHECKPOINT")
        t0 = time.perf_counter()
        conn.execute("CREATE INDEX d_v_idx ON d USING gpusparse (v)")
        build = time.perf_counter() - t0
    state["gpusparse_index"] = True
    st = db.device_stats(conn, "d_v_idx")
    idx_mb = relsize_mb(conn, "d_v_idx")
    log(f"bench: gpusparse CREATE INDEX {build:.1f} s, {idx_mb:.0f} MB of pages, "
        f"device store {st.get('bytes')}")
    conn.execute("SET enable_seqscan = off")
    sql = SEARCH.format(t="d", ty="spvec")
    p = plan(conn, sql, lits[0])
    passes, lat, found = one_client(conn, sql, lits, a.repeats, budget)
    rec, exact, _ = judge.judge(found)
    # the batch API, packed queries, keyed by id
    qbytes = sparsedata.packed(ds.queries)
    bsql = ("SELECT query, key, distance FROM gpusparse_search_packed('d_v_idx'::regclass, "
            "%s::bytea, 10, 'id', NULL::bigint)")
    conn.execute(bsql, (qbytes[:4 + 8 * ds.queries[0].nnz],)).fetchall()
    bpasses, rows = [], None
    for r in range(a.repeats):
        t = time.perf_counter()
        rows = conn.execute(bsql, (qbytes,)).fetchall()
        bpasses.append(time.perf_counter() - t)
    n = ds.queries.shape[0]
    byq = [[] for _ in range(n)]
    for qn, key, dist in rows:
        byq[qn - 1].append((key, -dist))
    brec, bexact, bmis = judge.judge([[k for k, _ in x] for x in byq],
                                     returned_scores=[[s for _, s in x] for x in byq])
    row = qps_row("gpusparse", "index scan, gpusparse.scan_batch 100", n, passes, lat,
                  exact_method="yes", recall=rec, exact_share=exact, build_s=build,
                  index_mb=idx_mb, device_mb=(st.get("bytes") or 0) / 2**20 or None,
                  batch_qps=n / median(bpasses), batch_ms=median(bpasses) * 1e3,
                  batch_recall=brec, batch_exact_share=bexact, score_mismatches=bmis,
                  batch_runs=";".join(f"{x:.4g}" for x in bpasses), plan=p)
    rep.add(**row)
    state["store"] = st
    log(f"bench: gpusparse: {row['qps']:.0f} QPS (p50 {row['p50_ms']:.2f} ms, p99 "
        f"{row['p99_ms']:.2f} ms), recall {rec:.4f}, exact {exact:.3f}; batch "
        f"{row['batch_qps']:.0f} QPS ({row['batch_ms']:.0f} ms), recall {brec:.4f}; plan {p}")
    conn.close()


def run_seqscan(cl, ds, judge, lits, a, rep, budget):
    nq = min(a.seqscan_queries, len(lits))
    sql = SEARCH.format(t="d", ty="spvec")
    for name, gucs in (("seqscan", {}), ("seqscan-serial", {"max_parallel_workers_per_gather": 0})):
        if not budget.ok(30):
            rep.note(f"{name}: deadline reached, not run")
            continue
        conn = db.connect(cl, jit="off", enable_indexscan="off", enable_bitmapscan="off", **gucs)
        p = plan(conn, sql, lits[0])
        passes, lat, found = one_client(conn, sql, lits[:nq], a.repeats, budget, warm=2)
        rec, exact, _ = judge.judge(found)
        row = qps_row(name, "parallel workers as planned" if not gucs else
                      "max_parallel_workers_per_gather 0", nq, passes, lat, exact_method="yes",
                      recall=rec, exact_share=exact, plan=p)
        rep.add(**row)
        log(f"bench: {name}: {row['qps']:.2f} QPS over {nq} queries, recall {rec:.4f}; plan {p}")
        conn.close()


class BuildWatch:
    """Logs a running CREATE INDEX's progress (pg_stat_progress_create_index) every 30 s
    from a thread of its own, so a build cut short still says how far it came."""

    def __init__(self, cl, name, every=30.0):
        self.name, self.every, self.last = name, every, None
        self.done = threading.Event()
        self.conn = db.connect(cl)
        self.t0 = time.time()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(self.every):
            try:
                row = self.conn.execute(
                    "SELECT phase, tuples_done, tuples_total FROM pg_stat_progress_create_index "
                    "WHERE command = 'CREATE INDEX'").fetchone()
            except Exception:
                return
            if row:
                self.last = (time.time() - self.t0, *row)
                log(f"bench: {self.name} build at {self.last[0]:.0f} s: {row[0]}, "
                    f"{row[1]} of {row[2]} tuples")

    def stop(self):
        self.done.set()
        self.thread.join(timeout=5)
        self.conn.close()

    def summary(self):
        if not self.last:
            return "no progress reported"
        return (f"at {self.last[0]:.0f} s the build reported {self.last[1]}, "
                f"{self.last[2]} of {self.last[3]} tuples")


def run_hnsw(cl, ds, judge, lits, a, rep, budget):
    conn = db.connect(cl, jit="off")
    conn.execute("CHECKPOINT")
    if a.deadline:
        conn.execute(f"SET statement_timeout = '{max(1, int(budget.left() - 60))}s'")
    if a.hnsw_mem:
        conn.execute(f"SET maintenance_work_mem = '{a.hnsw_mem}'")
    mem = db.scalar(conn, "SHOW maintenance_work_mem")
    watch = BuildWatch(cl, "dv_hnsw")
    t0 = time.perf_counter()
    try:
        conn.execute("CREATE INDEX dv_hnsw ON dv USING hnsw (v sparsevec_ip_ops) "
                     "WITH (m = 16, ef_construction = 64)")
    except Exception as e:  # psycopg.Error: a cancelled or failed build
        watch.stop()
        rep.note(f"hnsw: CREATE INDEX failed or was cancelled after {time.perf_counter() - t0:.0f} s "
                 f"(maintenance_work_mem {mem}): {str(e).splitlines()[0]}; {watch.summary()}")
        conn.close()
        return
    build = time.perf_counter() - t0
    watch.stop()
    rep.note(f"hnsw: CREATE INDEX {build:.0f} s, maintenance_work_mem {mem}; {watch.summary()}")
    conn.execute("RESET statement_timeout")
    idx_mb = relsize_mb(conn, "dv_hnsw")
    workers = db.scalar(conn, "SHOW max_parallel_maintenance_workers")
    log(f"bench: hnsw CREATE INDEX {build:.1f} s ({workers} parallel maintenance workers), "
        f"{idx_mb:.0f} MB")
    conn.execute("SET enable_seqscan = off")
    sql = SEARCH.format(t="dv", ty="sparsevec")
    hl = lits[:a.hnsw_nq]
    for ef in [int(x) for x in a.ef_search.split(",")]:
        if not budget.ok(20):
            rep.note(f"hnsw: deadline reached, ef_search {ef} and above left out")
            break
        conn.execute(f"SET hnsw.ef_search = {ef}")
        p = plan(conn, sql, hl[0])
        passes, lat, found = one_client(conn, sql, hl, a.repeats, budget, warm=10)
        rec, exact, _ = judge.judge(found)
        row = qps_row("hnsw", f"ef_search {ef}", len(hl), passes, lat, knob="ef_search",
                      knob_value=ef, exact_method="no (approximate)", recall=rec,
                      exact_share=exact, build_s=build, index_mb=idx_mb, plan=p)
        rep.add(**row)
        log(f"bench: hnsw ef_search {ef}: {row['qps']:.0f} QPS, recall {rec:.4f}")
    conn.close()


def wal_now(conn):
    """The WAL position and the cluster's count of full-page images so far."""
    conn.execute("SELECT pg_stat_force_next_flush()")     # this session's counts, reported
    return conn.execute("SELECT pg_current_wal_insert_lsn(), wal_fpi FROM pg_stat_wal").fetchone()


def wal_diff(conn, a, b):
    """(bytes, full-page images) written from a to b."""
    return (int(conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (str(b[0]), str(a[0]))).fetchone()[0]),
            int(b[1]) - int(a[1]))


def run_updates(cl, ds, a, rep, budget, state):
    conn = db.connect(cl, jit="off")
    rng = np.random.default_rng(11)
    phases = []
    if state.get("gpusparse_index"):
        phases.append(("gpusparse", True))
        # the pages changed at every VACUUM, as before the dead-row log
        phases.append(("gpusparse, vacuum_log_limit 0", "nolog"))
    else:
        rep.note("updates: no gpusparse index (engine not run or failed): heap only")
    if a.btree_reference:
        phases.append(("btree (id) only", "btree"))
    phases.append(("heap only", False))
    for name, with_index in phases:
        if with_index == "nolog":
            conn.execute("ALTER INDEX d_v_idx SET (vacuum_log_limit = 0)")
        elif with_index is not True:
            conn.execute("DROP INDEX IF EXISTS d_v_idx")
            conn.execute("DROP INDEX IF EXISTS d_id_btree")
            if with_index == "btree":
                conn.execute("CREATE INDEX d_id_btree ON d (id)")
            conn.execute("VACUUM d")
        dels, vacs = [], []
        wal = {"delete": [], "vacuum": []}
        for r in range(a.update_rounds):
            if not budget.ok(30):
                rep.note(f"updates ({name}): deadline reached after {r} rounds")
                break
            ids = np.sort(rng.choice(ds.n, size=min(a.deletes, ds.n), replace=False))
            conn.execute("CHECKPOINT")
            w0 = wal_now(conn)
            t = time.perf_counter()
            cnt = conn.execute("DELETE FROM d USING unnest(%s::bigint[]) AS x(id) "
                               "WHERE d.id = x.id", (ids.tolist(),)).rowcount
            dels.append(time.perf_counter() - t)
            w1 = wal_now(conn)
            t = time.perf_counter()
            conn.execute("VACUUM (INDEX_CLEANUP ON) d")
            vacs.append(time.perf_counter() - t)
            w2 = wal_now(conn)
            wal["delete"].append(wal_diff(conn, w0, w1))
            wal["vacuum"].append(wal_diff(conn, w1, w2))
            assert cnt == len(ids), (cnt, len(ids))
            sparsedata.copy_into(conn, "d", ds, ids)           # put them back
            conn.execute("VACUUM d")
        if not dels:
            continue
        row = {"engine": f"updates: {name}", "setting": f"DELETE {a.deletes} random rows + "
               "VACUUM (INDEX_CLEANUP ON)", "delete_s": median(dels), "vacuum_s": median(vacs),
               "total_s": median([d + v for d, v in zip(dels, vacs)]),
               "vacuum_mean_s": sum(vacs) / len(vacs),
               "total_mean_s": sum(d + v for d, v in zip(dels, vacs)) / len(dels),
               "rounds": len(dels), "vacuum_runs": ";".join(f"{v:.4g}" for v in vacs),
               "delete_runs": ";".join(f"{v:.4g}" for v in dels)}
        for ph in ("delete", "vacuum"):
            row[f"{ph}_wal_mb"] = median([x[0] for x in wal[ph]]) / 1e6
            row[f"{ph}_fpi"] = median([x[1] for x in wal[ph]])
        rep.add(**row)
        log(f"bench: updates ({name}): delete {row['delete_s']:.2f} s, vacuum "
            f"{row['vacuum_s']:.2f} s (medians of {len(dels)}); WAL delete "
            f"{row['delete_wal_mb']:.1f} MB ({row['delete_fpi']:.0f} full pages), vacuum "
            f"{row['vacuum_wal_mb']:.1f} MB ({row['vacuum_fpi']:.0f} full pages)")
    conn.close()


# ------------------------------------------------------------------ report

def finish(rep, ds, a):
    rows = rep.rows
    srch = [r for r in rows if r.get("qps") or r.get("batch_qps")]
    seq = next((r for r in srch if r["engine"] == "seqscan"), None)
    hn = [r for r in srch if r["engine"] == "hnsw" and r.get("recall") is not None]
    best = max(hn, key=lambda r: (round(r["recall"], 4), r["qps"])) if hn else None
    for r in srch:
        if seq and r.get("qps"):
            r["x_seqscan"] = r["qps"] / seq["qps"]
        if best and r.get("qps"):
            r["x_hnsw_best"] = r["qps"] / best["qps"]
    cols = ["engine", "setting", "exact_method", "recall", "exact_share", "qps", "p50_ms",
            "p99_ms", "x_seqscan", "x_hnsw_best", "batch_qps", "batch_ms", "build_s",
            "index_mb", "nq"]
    rep.table("Search: recall@10 (score-aware) and queries per second", cols, srch)
    upd = [r for r in rows if str(r.get("engine", "")).startswith("updates")]
    if upd:
        rep.table("Updates: DELETE + VACUUM (INDEX_CLEANUP ON), medians",
                  ["engine", "setting", "delete_s", "vacuum_s", "total_s", "vacuum_mean_s",
                   "total_mean_s", "rounds",
                   "vacuum_runs", "delete_wal_mb", "delete_fpi", "vacuum_wal_mb", "vacuum_fpi"],
                  upd)
    gs = next((r for r in srch if r["engine"] == "gpusparse"), None)
    tg = []
    if gs and seq:
        x = gs["qps"] / seq["qps"]
        tg.append({"target": "gpusparse 1 client >= 20x the sequential scan's QPS",
                   "measured": f"{x:.1f}x ({gs['qps']:.0f} / {seq['qps']:.2f} QPS)",
                   "met": "yes" if x >= 20 else "no"})
    if gs and best:
        x = gs["qps"] / best["qps"]
        tg.append({"target": "gpusparse 1 client faster than pgvector HNSW at its best recall",
                   "measured": f"{x:.2f}x ({gs['qps']:.0f} / {best['qps']:.0f} QPS; HNSW "
                               f"{best['setting']}, recall {best['recall']:.4f})",
                   "met": "yes" if x > 1 else "no"})
    ui = next((r for r in upd if r["engine"] == "updates: gpusparse"), None)
    uh = next((r for r in upd if r["engine"] == "updates: heap only"), None)
    if ui and uh:
        xv = ui["vacuum_s"] / uh["vacuum_s"]
        xt = ui["total_s"] / uh["total_s"]
        xm = ui["vacuum_mean_s"] / uh["vacuum_mean_s"]
        tg.append({"target": "DELETE 10K + VACUUM (INDEX_CLEANUP ON) within 2x of the heap's own",
                   "measured": f"VACUUM {xv:.2f}x ({ui['vacuum_s']:.3f} / {uh['vacuum_s']:.3f} s, "
                               f"medians), {xm:.2f}x by the means over rounds; "
                               f"DELETE + VACUUM {xt:.2f}x ({ui['total_s']:.3f} / "
                               f"{uh['total_s']:.3f} s)",
                   "met": "yes" if max(xv, xm) <= 2 and xt <= 2 else
                          ("VACUUM alone yes, with the DELETE no" if max(xv, xm) <= 2 else "no")})
    if tg:
        rep.table("Targets", ["target", "measured", "met"], tg)
    rep.plot(lambda rows, stem: plots.recall_qps(
        [r for r in rows if r.get("recall") is not None], stem,
        [("qps", "one query a call (1 client)"), ("batch_qps", "all queries in one call")]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--dataset", default="bm25-debian", help="bm25-debian | splade-synth-N")
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--seqscan-queries", type=int, default=50)
    ap.add_argument("--hnsw-nq", type=int, default=1000, help="queries for the HNSW sweep")
    ap.add_argument("--ef-search", default="40,80,160,320,640,1000")
    ap.add_argument("--hnsw-workers", type=int, default=0,
                    help="parallel workers for pgvector's HNSW build (0: the cluster's default)")
    ap.add_argument("--hnsw-mem", default="",
                    help="maintenance_work_mem for the HNSW build (e.g. 16GB: the graph in memory)")
    ap.add_argument("--seismic-builds", default="3500:0.1:0.4:1.5,3500:0.2:0.9:6",
                    help="n_postings:centroid_fraction:summary_energy:max_fraction,...")
    ap.add_argument("--seismic-search", default="10:0.3,10:0.5,10:0.7,10:0.9",
                    help="query_cut:heap_factor,...")
    ap.add_argument("--scipy-single-nq", type=int, default=100,
                    help="queries one a call for scipy on a collection in parts")
    ap.add_argument("--torch-batches", default="1,128,500")
    ap.add_argument("--deletes", type=int, default=10000)
    ap.add_argument("--update-rounds", type=int, default=3)
    ap.add_argument("--no-btree-reference", dest="btree_reference", action="store_false",
                    help="updates: leave out the btree (id) reference (a plain index's cost)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds: no new measurement starts after that")
    ap.add_argument("--device", default=os.environ.get("GPUINDEX_BENCH_DEVICE", "auto"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 54396)))
    ap.add_argument("--dir", default=os.environ.get("BENCH_SPARSE_DIR", "/tmp/gpuindex-bench-sparse"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    ap.add_argument("--reuse", action="store_true",
                    help="use the cluster in --dir and its table d when they hold this set (a "
                         "run with --keep and --engines none loads a large set once); the server "
                         "restarts with this run's settings and library, so a kept index is "
                         "loaded again by its first search")
    a = ap.parse_args()
    engines = [e.strip() for e in a.engines.split(",") if e.strip() not in ("", "none")]
    for e in engines:
        if e not in ENGINES:
            raise SystemExit(f"unknown engine {e} ({', '.join(ENGINES)})")
    budget = Budget(a.deadline)
    t_start = time.time()
    load0 = tuple(round(x, 2) for x in os.getloadavg())

    ds = sparsedata.load(a.dataset, a.nq, log=log)
    log(f"bench: {a.dataset}: {ds.n} documents, dimension {ds.dim}, {ds.postings} postings, "
        f"{ds.queries.shape[0]} queries ({ds.queries.nnz / ds.queries.shape[0]:.2f} terms each)")
    gt_ids, gt_scores = sparsedata.ground_truth(ds, log=log)
    judge = sparsedata.Judge(ds, gt_scores)
    lits = sparsedata.literals(ds.queries)

    extra = {}
    if a.hnsw_workers:
        # pgvector's parallel build: its workers come from max_worker_processes, which
        # the device service shares
        extra = {"max_worker_processes": str(a.hnsw_workers + 4),
                 "max_parallel_workers": str(a.hnsw_workers),
                 "max_parallel_maintenance_workers": str(a.hnsw_workers)}
    cl = Cluster(a.dir, a.port, device=a.device, extra=extra)
    reused = not cl.start(reuse=a.reuse)
    conn = db.connect(cl)
    conn.execute("CREATE EXTENSION IF NOT EXISTS gpuindex")
    if "hnsw" in engines:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    env = environment.describe(conn, cl)
    env["dataset"] = json.dumps({k: v for k, v in ds.stats.items()
                                 if k not in ("sources", "bm25")})
    if "sources" in ds.stats:
        s = ds.stats["sources"]
        env["sources"] = (f"Debian {s['debian']['suite']} Translation-en (Release of "
                          f"{s['debian']['release_date']}): {s['debian']['packages']} packages, "
                          f"{s['debian']['distinct_descriptions']} distinct long descriptions; "
                          f"{s['man']['pages']} man pages ({s['man']['documents']} passages)")
    try:
        import scipy
        env["scipy"] = scipy.__version__
    except Exception:
        pass
    env["torch"] = torch_ref.available()[1]
    opts = {k: v for k, v in vars(a).items() if k not in ("dir", "port")}
    rep = Report("sparse", a.dataset, env, opts)
    rep.note("recall@10 is score-aware against scipy's exact float64 answer (ties at the "
             "10th score count as hits); exact_share: queries whose 10 rows all count")
    state = {}
    try:
        t0 = time.perf_counter()
        # the kept table must hold this very set (name, size, seed, dimension)
        ident = json.dumps({k: ds.stats.get(k) for k in ("name", "docs", "seed", "dim", "postings")},
                           sort_keys=True)
        have = False
        load = bool({"gpusparse", "seqscan", "hnsw", "updates"} & set(engines))
        if load and reused and conn.execute("SELECT to_regclass('d') IS NOT NULL").fetchone()[0]:
            have = conn.execute("SELECT obj_description('d'::regclass, 'pg_class')").fetchone()[0] == ident
        if not load:
            rep.note("table d: not loaded (no engine of this run searches from SQL)")
        elif have:
            # a valid index a killed run left building is kept: its build is the slow part
            state["kept_index"] = conn.execute(
                "SELECT coalesce((SELECT indisvalid FROM pg_index "
                "WHERE indexrelid = to_regclass('d_v_idx')), false)").fetchone()[0]
            if not state["kept_index"]:
                conn.execute("DROP INDEX IF EXISTS d_v_idx")
            heap_mb = relsize_mb(conn, "d")
            log(f"bench: table d of {ds.n} rows kept from an earlier run, {heap_mb:.0f} MB")
            rep.note(f"table d: {ds.n} rows, heap {heap_mb:.0f} MB, kept from an earlier run (--reuse)")
        else:
            conn.execute("DROP TABLE IF EXISTS d")
            conn.execute(f"CREATE TABLE d (id bigint, v spvec({ds.dim})) "
                         "WITH (autovacuum_enabled = off)")
            secs = sparsedata.copy_into(conn, "d", ds)
            conn.execute("VACUUM (ANALYZE, FREEZE) d")
            conn.execute(psql.SQL("COMMENT ON TABLE d IS {}").format(psql.Literal(ident)))
            conn.execute("CHECKPOINT")
            heap_mb = relsize_mb(conn, "d")
            log(f"bench: loaded {ds.n} rows into d in {secs:.1f} s (binary COPY), {heap_mb:.0f} MB")
            rep.note(f"table d: {ds.n} rows, heap {heap_mb:.0f} MB, binary COPY {secs:.1f} s")
        if "hnsw" in engines:
            conn.execute("DROP TABLE IF EXISTS dv")
            conn.execute(f"CREATE TABLE dv (id bigint, v sparsevec({ds.dim})) "
                         "WITH (autovacuum_enabled = off)")
            sparsedata.copy_into(conn, "dv", ds)
            conn.execute("VACUUM (ANALYZE, FREEZE) dv")
        steps = [("scipy", lambda: run_scipy(ds, judge, a, rep, budget)),
                 ("seismic", lambda: run_seismic(ds, judge, a, rep, budget)),
                 ("torch", lambda: run_torch(ds, judge, a, rep, budget)),
                 ("gpusparse", lambda: run_gpusparse(cl, ds, judge, lits, a, rep, budget, state)),
                 ("seqscan", lambda: run_seqscan(cl, ds, judge, lits, a, rep, budget)),
                 ("hnsw", lambda: run_hnsw(cl, ds, judge, lits, a, rep, budget)),
                 ("updates", lambda: run_updates(cl, ds, a, rep, budget, state))]
        for name, fn in steps:
            if name not in engines:
                continue
            if not budget.ok(15):
                rep.note(f"{name}: not run (deadline)")
                continue
            t = time.time()
            try:
                fn()
            except Exception as e:
                traceback.print_exc()
                rep.note(f"{name} failed: {type(e).__name__}: {str(e).strip().splitlines()[0]}")
                log(cl.server_log_tail(10))
            log(f"bench: {name} took {time.time() - t:.0f} s")
            rep.checkpoint(lambda r: finish(r, ds, a), name)
        rep.note(f"the whole run took {time.time() - t_start:.0f} s; load average (1, 5, 15 min) "
             f"at the start {load0}, at the end {tuple(round(x, 2) for x in os.getloadavg())}")
        finish(rep, ds, a)
        path = rep.write()
        log(f"bench: wrote {path}")
    finally:
        conn.close()
        if not a.keep:
            cl.stop()


if __name__ == "__main__":
    main()
