"""genie benchmark: edit-distance search over real strings, int4[] sets by common
elements and L2 over vectors through LSH, genie against its peers, every engine in one
run on one private cluster (non-root $PG_USER, port 54397, /tmp/gpuindex-bench-genie).

Scenarios (--scenario):
  seq   Debian package names and description lines (bench/genie/seqdata.py); queries are
        sampled rows with 10-40 % random character edits. Engines (--seq-engines):
          genie-batch       genie_seq_search(index, queries, 10, C), --batch queries a call,
                            sweeping C (--candidates); its exact flag rate
          genie-knn         ORDER BY s <%> q LIMIT K, re-ranked by levenshtein (--genie-k)
          trgm-gist-knn     pg_trgm GiST ORDER BY s <-> q LIMIT K, re-ranked (--knn-k)
          trgm-gin, trgm-gist  pg_trgm WHERE s % q ORDER BY levenshtein LIMIT 10, sweeping
                            pg_trgm.similarity_threshold (--thresholds)
          levenshtein-scan  ORDER BY levenshtein(s, q) LIMIT 10 over every row (exact);
                            checks the ground truth on --scan-nq queries
        One-query engines run the first --single-nq (genie-knn) or --slow-nq (pg_trgm)
        queries; accuracy is also given over the first min(...) queries all ran ("common").
  sets  int4[] rows of 10-50 distinct Zipf-distributed elements (bench/genie/setdata.py),
        queries of 5-20: genie ORDER BY tags <&> q LIMIT 10, GIN (intarray's gin__int_ops)
        WHERE tags && q ORDER BY icount(tags & q) DESC LIMIT 10, and that ORDER BY over
        every row (exact).
  lsh   real[] vectors (--lsh-dataset, a gibench dataset with its exact top 100): genie
        E2LSH indexes, one per (m, w) of --lsh-configs, ORDER BY v <~> genie_e2lsh(q, m,
        w, d, 0) LIMIT 10 (count order) and the top C by count re-ranked by v <-> q
        (--rerank), on the first --lsh-nq queries; gpuivf (lists sqrt(rows)) sweeping
        --probes on --ivf-nq queries; genie_lsh_functions next to the m used.

Accuracy: the true edit distances (counts) of the returned rows, computed by the harness,
against the exact top 10: top10_equal is the share of queries whose 10 values equal the
exact 10, distance_recall (count_recall) the mean share of the exact multiset found;
lsh: recall@10 of the returned ids. QPS: the median of --repeats passes. Output:
docs/benchmarks/genie-{seq,sets,lsh}-DATA-DEVICE.{csv,md,png}.

    bash bench/genie/run.sh [--device host|cuda] [options]   # prepares, then runs this
"""
import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from gibench import db, environment  # noqa: E402
from gibench.cluster import Cluster  # noqa: E402
from gibench.report import Report  # noqa: E402

import lshbench  # noqa: E402
import seqbench  # noqa: E402
import seqdata  # noqa: E402
import setbench  # noqa: E402
import setdata  # noqa: E402
from common import Budget, log  # noqa: E402

DEVICE_GUC = {"host": "host", "cuda": "cuda"}


def environment_of(conn, cl):
    env = environment.describe(conn, cl)
    for k in [k for k in env if k in ("ext_vector", "faiss")]:
        del env[k]
    for ext in ("pg_trgm", "fuzzystrmatch", "intarray"):
        v = db.scalar(conn, "SELECT extversion FROM pg_extension WHERE extname = %s", (ext,))
        env[f"ext_{ext}"] = v or "not installed"
    try:
        import rapidfuzz
        env["rapidfuzz"] = rapidfuzz.__version__
    except ImportError:
        env["rapidfuzz"] = "not installed"
    env["load_average_start"] = str(tuple(round(x, 2) for x in os.getloadavg()))
    return env


def run_steps(steps, rep, finish, budget, cl):
    for name, fn in steps:
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
        log(f"{name} took {time.time() - t:.0f} s")
        rep.checkpoint(finish, name)


def scenario_seq(cl, conn, a, budget, opts):
    ds = seqdata.load(a.rows, a.nq, log=log)
    env = environment_of(conn, cl)
    env["dataset"] = json.dumps(ds.stats)
    rep = Report("genie-seq", ds.name, env, dict(opts, tag=a.device))
    rep.note("accuracy: true edit distances of the returned rows (rapidfuzz, unit costs) "
             "against the exact top 10; 'common' columns: the first "
             f"{min(a.slow_nq, a.single_nq, a.nq)} queries, which every engine but the "
             "scan ran")
    engines = [e.strip() for e in a.seq_engines.split(",") if e.strip()]
    common = min(a.slow_nq, a.single_nq, a.nq)
    judge = seqbench.Judge(ds, common)
    state = {}
    secs = seqbench.load(conn, ds)
    rep.note(f"tables sq, sq_gin, sq_gist: {len(ds.strings)} rows each, loaded in {secs:.1f} s")
    seqbench.build(conn, rep, state)
    steps = {
        "genie-batch": lambda: seqbench.run_genie_batch(cl, ds, judge, a, rep, budget, state),
        "genie-knn": lambda: seqbench.run_genie_knn(cl, ds, judge, a, rep, budget, state),
        "trgm-gist-knn": lambda: seqbench.run_gist_knn(cl, ds, judge, a, rep, budget, state),
        "trgm-gin": lambda: seqbench.run_trgm_filter(cl, ds, judge, a, rep, budget, state, "gin"),
        "trgm-gist": lambda: seqbench.run_trgm_filter(cl, ds, judge, a, rep, budget, state, "gist"),
        "levenshtein-scan": lambda: seqbench.run_scan(cl, ds, judge, a, rep, budget, state)}
    run_steps([(e, steps[e]) for e in seqbench.ENGINES if e in engines], rep,
              lambda r: seqbench.finish(r, a, a.device), budget, cl)
    return rep, lambda r: seqbench.finish(r, a, a.device)


def scenario_sets(cl, conn, a, budget, opts):
    ds = setdata.make(a.set_rows, max(a.set_nq, a.set_slow_nq), a.universe, a.zipf, log=log)
    env = environment_of(conn, cl)
    env["dataset"] = json.dumps(ds.stats)
    rep = Report("genie-sets", ds.name, env, dict(opts, tag=a.device))
    intarray = db.scalar(conn, "SELECT count(*) FROM pg_extension WHERE extname = 'intarray'") > 0
    if not intarray:
        rep.note("intarray is not installed: GIN with array_ops, counts in plain SQL")
    state = {}
    secs = setbench.load(conn, ds)
    rep.note(f"tables st, st_gin: {len(ds.rows)} rows each, loaded in {secs:.1f} s; "
             f"accuracy by the true common-element counts of the returned rows")
    setbench.build(conn, rep, state, intarray)
    engines = [e.strip() for e in a.set_engines.split(",") if e.strip()]
    run_steps([(e, (lambda e=e: setbench.run(cl, ds, a, rep, budget, state, e, intarray)))
               for e in setbench.ENGINES if e in engines], rep,
              lambda r: setbench.finish(r, a.device), budget, cl)
    return rep, lambda r: setbench.finish(r, a.device)


def scenario_lsh(cl, conn, a, budget, opts):
    ds, scale = lshbench.load_data(a.lsh_dataset)
    env = environment_of(conn, cl)
    env["dataset"] = json.dumps(dict(ds.info, rows=len(ds.base), dim=ds.dim,
                                     queries=len(ds.queries)))
    env["distance_scale"] = json.dumps({k: round(v, 3) for k, v in scale.items()})
    rep = Report("genie-lsh", ds.name, env, dict(opts, tag=a.device))
    rep.note("recall@10: returned ids against the exact top 10 (gibench ground truth); "
             f"the 'recall' column is over the first {a.lsh_nq} queries, which every "
             "engine ran; distance_scale: median L2 to the 1st, 10th, 100th nearest row "
             f"and to a random row over {min(256, len(ds.queries))} queries")
    state = {}
    secs = lshbench.load(conn, ds)
    rep.note(f"table lv: {len(ds.base)} rows of {ds.dim} dimensions, loaded in {secs:.1f} s")
    lshbench.build(conn, ds, a, rep, state, budget)
    taus = lshbench.tau(conn, a, scale)
    engines = [e.strip() for e in a.lsh_engines.split(",") if e.strip()]
    steps = {
        "gpuivf": lambda: lshbench.run_gpuivf(cl, ds, a, rep, budget, state),
        "genie-count": lambda: lshbench.run_genie(cl, ds, a, rep, budget, state, False),
        "genie-rerank": lambda: lshbench.run_genie(cl, ds, a, rep, budget, state, True)}
    fin = lambda r: lshbench.finish(r, a.device, taus)  # noqa: E731
    run_steps([(e, steps[e]) for e in lshbench.ENGINES if e in engines], rep, fin, budget, cl)
    return rep, fin


SCENARIOS = {"seq": scenario_seq, "sets": scenario_sets, "lsh": scenario_lsh}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--scenario", default="seq,sets", help="seq, sets, lsh or a list (seq,sets)")
    ap.add_argument("--device", choices=sorted(DEVICE_GUC), default="host",
                    help="gpuindex.device; the output names carry it")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, default=100000, help="seq: strings in the table")
    ap.add_argument("--nq", type=int, default=1024, help="seq: queries (genie-batch)")
    ap.add_argument("--batch", type=int, default=1024, help="seq: queries a genie_seq_search call")
    ap.add_argument("--candidates", default="10,50,100,300,1000,3000")
    ap.add_argument("--single-nq", type=int, default=256, help="seq: queries of genie-knn")
    ap.add_argument("--genie-k", default="10,50,100,300,1000")
    ap.add_argument("--slow-nq", type=int, default=64, help="seq: queries of the pg_trgm engines")
    ap.add_argument("--knn-k", default="10,100,300,1000")
    ap.add_argument("--thresholds", default="0.3,0.2,0.15")
    ap.add_argument("--scan-nq", type=int, default=8, help="seq: queries of the levenshtein() scan")
    ap.add_argument("--seq-engines", default=",".join(seqbench.ENGINES))
    ap.add_argument("--set-rows", type=int, default=100000)
    ap.add_argument("--set-nq", type=int, default=1024, help="sets: queries of genie")
    ap.add_argument("--set-slow-nq", type=int, default=64, help="sets: queries of GIN")
    ap.add_argument("--set-scan-nq", type=int, default=64, help="sets: queries of the scan")
    ap.add_argument("--universe", type=int, default=100000, help="sets: distinct elements")
    ap.add_argument("--zipf", type=float, default=1.0, help="sets: Zipf exponent")
    ap.add_argument("--set-engines", default=",".join(setbench.ENGINES))
    ap.add_argument("--lsh-dataset", default="synth-100k-128",
                    help="lsh: a gibench dataset (bench/gibench/datasets.py)")
    ap.add_argument("--lsh-nq", type=int, default=256, help="lsh: queries of genie")
    ap.add_argument("--ivf-nq", type=int, default=1000, help="lsh: queries of gpuivf")
    ap.add_argument("--lsh-configs", default="32:16,64:16,128:16,128:8,128:24",
                    help="lsh: the genie indexes, m:w each")
    ap.add_argument("--lsh-d", type=int, default=1024, help="lsh: lists of each function")
    ap.add_argument("--rerank", default="100,300,1000", help="lsh: candidates C re-ranked")
    ap.add_argument("--probes", default="1,2,4,8,16,32,64", help="lsh: gpuivf.probes")
    ap.add_argument("--ivf-lists", type=int, default=0, help="lsh: gpuivf lists (0: sqrt)")
    ap.add_argument("--lsh-engines", default=",".join(lshbench.ENGINES))
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds: no new measurement starts after that")
    ap.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 54397)))
    ap.add_argument("--dir", default=os.environ.get("BENCH_GENIE_DIR", "/tmp/gpuindex-bench-genie"))
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    a = ap.parse_args()
    scen = [s.strip() for s in a.scenario.split(",") if s.strip()]
    for s in scen:
        if s not in SCENARIOS:
            raise SystemExit(f"unknown scenario {s} ({', '.join(SCENARIOS)})")
    budget = Budget(a.deadline)
    t_start = time.time()
    opts = {k: v for k, v in vars(a).items() if k not in ("dir", "port", "keep")}
    cl = Cluster(a.dir, a.port, device=DEVICE_GUC[a.device])
    cl.start()
    conn = db.connect(cl)
    try:
        for e in ("gpuindex", "pg_trgm", "fuzzystrmatch", "intarray"):
            try:
                conn.execute(f"CREATE EXTENSION IF NOT EXISTS {e}")
            except Exception as ex:
                log(f"CREATE EXTENSION {e} failed: {str(ex).splitlines()[0]}")
                if e in ("gpuindex", "pg_trgm", "fuzzystrmatch"):
                    raise
        backend = db.scalar(conn, "SELECT backend FROM gpuindex_service()")
        want = "cuda" if a.device == "cuda" else "cpu"
        if backend != want:
            raise SystemExit(f"gpuindex service backend is {backend!r}, --device {a.device} "
                             f"wants {want!r}")
        for s in scen:
            t0 = time.time()
            rep, finish = SCENARIOS[s](cl, conn, a, budget, opts)
            rep.note(f"this scenario took {time.time() - t0:.0f} s; load average (1, 5, 15 "
                     f"min) at its end {tuple(round(x, 2) for x in os.getloadavg())}")
            finish(rep)
            log(f"wrote {rep.write()}")
        log(f"the whole run took {time.time() - t_start:.0f} s")
    finally:
        conn.close()
        if not a.keep:
            cl.stop()


if __name__ == "__main__":
    main()
