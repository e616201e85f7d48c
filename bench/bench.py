#!/usr/bin/env python3
"""gpuindex benchmarks: run a named scenario against a private local PostgreSQL and write
CSV, PNG and markdown into docs/benchmarks/.  Normally started by bench/run.sh, which
installs what it needs first.  `bench.py --help` lists every option."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gibench import datasets, db, environment, faissref, loader  # noqa: E402
from gibench.cluster import Cluster  # noqa: E402
from gibench.context import Context  # noqa: E402
from gibench.engines import SQL_ENGINES  # noqa: E402
from gibench.scenarios import SCENARIOS  # noqa: E402


def options(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("scenario", choices=sorted(SCENARIOS) + ["all"])
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default="synth-100k-128",
                   help="synth-N-D[-SEED] | files:BASE,QUERIES[,GT] | minilm[-N]")
    g.add_argument("--metric", choices=["l2", "ip", "cosine"], help="default: the dataset's")
    g.add_argument("--nq", type=int, default=1000, help="queries used")
    g = p.add_argument_group("engines")
    g.add_argument("--engines", default="gpuivf,ivfflat,hnsw",
                   help="SQL engines; gpuivf is skipped (columns left empty) if not installed")
    g.add_argument("--refs", default="auto",
                   help="no-database references: auto (Faiss CPU, plus Faiss GPU and cuVS "
                        "when a GPU is present), none, or a list of faiss-ivf,faiss-hnsw,"
                        "faiss-gpu-ivf,faiss-gpu-ivfpq,faiss-gpu-wheel,cuvs-ivf,cuvs-cagra "
                        "(pqmodes: faiss-gpu-ivfpq)")
    g.add_argument("--lists", type=int, help="IVF lists (default: round(sqrt(rows)))")
    g.add_argument("--m", type=int, default=16, help="HNSW m")
    g.add_argument("--ef-construction", type=int, default=64, help="HNSW ef_construction")
    g.add_argument("--knobs", help="search sweep: probes / ef_search values, comma-separated")
    g.add_argument("--probes", help="search sweep: IVF probes values (gpuivf, ivfflat, Faiss "
                                    "IVF), comma-separated; overrides --knobs for them")
    g.add_argument("--ef-search", help="search sweep: HNSW ef_search values (hnsw, Faiss "
                                       "HNSW), comma-separated; overrides --knobs for them")
    g.add_argument("--knob", type=int, help="single knob value (stream, orient)")
    g.add_argument("--threads", type=int, default=os.cpu_count(), help="Faiss batch threads")
    g = p.add_argument_group("measurement")
    g.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    g.add_argument("--clients", default="1,8", help="pgbench client counts (search)")
    g.add_argument("--seconds", type=int, default=5, help="pgbench run length")
    g.add_argument("--no-batch", action="store_true", help="skip the batch API (search)")
    g.add_argument("--window", type=int, default=200000, help="stream: W rows")
    g.add_argument("--batch", type=int, default=10000,
                   help="stream: B rows a step; orient: rows deleted/reinserted a round")
    g.add_argument("--steps", type=int, default=50, help="stream: steps")
    g.add_argument("--searches", type=int, default=100, help="stream: searches a step")
    g.add_argument("--rows", type=int, default=1000000, help="mutate: table rows (capped "
                   "at the dataset size)")
    g.add_argument("--inserts", type=int, default=200, help="mutate: single-row INSERTs")
    g.add_argument("--deletes", type=int, default=5, help="mutate: DELETE+VACUUM rounds")
    g.add_argument("--mutation-repeats", type=int, default=3, help="orient: rounds")
    g.add_argument("--deadline", type=float,
                   default=float(os.environ.get("BENCH_DEADLINE", 0)) or None,
                   help="seconds after the start by which no new measurement begins: the "
                        "scenario skips the rest (noted in its report) and writes what it has; "
                        "each engine gets an equal share of the time left")
    g = p.add_argument_group("server")
    g.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/tmp/gpuindex-bench"))
    g.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 54395)))
    g.add_argument("--device", default=os.environ.get("BENCH_DEVICE", "auto"),
                   help="gpuindex.device: auto | cpu | cuda")
    g.add_argument("--set", action="append", default=[], metavar="GUC=VALUE",
                   help="extra postgresql.conf setting (repeatable)")
    g.add_argument("--reuse", action="store_true",
                   help="reuse a running benchmark cluster (and its loaded data)")
    g.add_argument("--keep", action="store_true", help="leave the cluster running")
    g.add_argument("--keep-indexes", action="store_true")
    g.add_argument("--tag", default="", help="suffix of the output files' names")
    return p.parse_args(argv)


def sql_engines(conn, names, notes):
    out = []
    for name in [n for n in names.split(",") if n]:
        eng = SQL_ENGINES[name]
        if not db.scalar(conn, "SELECT count(*) FROM pg_am WHERE amname = %s", (eng.am,)):
            notes.append(f"{name}: access method not present in this server, its rows are "
                         f"left empty")
            continue
        out.append(eng)
    return out


def ref_engines(spec, notes):
    if spec == "none":
        return []
    names = spec.split(",") if spec != "auto" else [
        "faiss-ivf", "faiss-hnsw", "faiss-gpu-ivf", "cuvs-ivf", "cuvs-cagra"]
    refs, skipped = faissref.engines(names)
    if spec != "auto":
        notes.extend(skipped)
    return refs


def main(argv):
    o = options(argv)
    t0 = time.time()
    ds = datasets.load(o.dataset, o.metric, o.nq)
    print(f"bench: dataset {ds.name}: {ds.base.shape[0]} x {ds.dim}, {len(ds.queries)} "
          f"queries, metric {ds.metric}", flush=True)
    extra = dict(s.split("=", 1) for s in o.set)
    cluster = Cluster(o.dir, o.port, o.device, extra)
    cluster.start(reuse=o.reuse)
    notes = []
    try:
        conn = db.connect(cluster)
        loader.ensure_extensions(conn, SQL_ENGINES.values(), notes)
        engines = sql_engines(conn, o.engines, notes)
        loader.load_dataset(conn, ds, {e.coltype for e in engines} or {"vector"})
        env = environment.describe(conn, cluster)
        env["dataset"] = f"{ds.name}: {ds.base.shape[0]} x {ds.dim}, {len(ds.queries)} " \
                         f"queries, metric {ds.metric}, {ds.info}"
        refs = ref_engines(o.refs, notes)
        ctx = Context(o, cluster, conn, ds, engines, refs, env, notes,
                      deadline=t0 + o.deadline if o.deadline else None)
        for note in notes:
            ctx.log(note)
        for name in (sorted(SCENARIOS) if o.scenario == "all" else [o.scenario]):
            ctx.log(f"scenario {name}")
            path = SCENARIOS[name].run(ctx).write()
            ctx.log(f"wrote {path}")
    except Exception:
        print(cluster.server_log_tail(), file=sys.stderr)
        raise
    finally:
        if not o.keep:
            cluster.stop()
    print(f"bench: done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
