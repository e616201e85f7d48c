"""Scale-out benchmark: one gpuivf index spread over two PostgreSQL servers with
postgres_fdw, against the same rows on one server, every form in one run on three private
clusters on this machine (non-root $PG_USER, ports P, P+1, P+2, default 54405-54407,
directory /tmp/gpuindex-bench-scaleout/{coord,shard1,shard2}).

The coordinator holds the whole dataset in a local table `items` with its own gpuivf
index (lists = sqrt(rows)): the one-server reference. Its table `parts` is hash-partitioned
by id into two foreign tables, one on each shard server, whose plain tables `items` hold
their half of the same rows (put there with COPY by the partition bound's hash, checked
through the coordinator) with a gpuivf index each (lists = sqrt(rows of the shard)). The
shards' gpuivf.probes is set through the foreign servers' libpq options.

Engines (one client, one query at a time, ORDER BY embedding <-> q LIMIT k):
  one             the local table on the coordinator (one server with all rows)
  plain           SELECT ... FROM parts ORDER BY ... LIMIT k: a Merge Append of the two
                  foreign scans, each shipped the ORDER BY without the LIMIT, fetched
                  fetch_size (100) rows at a time, one shard after the other
  plain-fetch11   the same over foreign tables with fetch_size = k + 1
  union           per-shard (SELECT ... ORDER BY ... LIMIT k) UNION ALL ..., ORDER BY d + 0,
                  id LIMIT k outside: an Append of async foreign scans, each shipped the LIMIT
  union-sync      the same with enable_async_append = off (the shards one after the other)
  union1          the union form over shard 1 alone (one branch): the model's one-shard point
  shard1, shard2  the same query sent straight to each shard (its half of the rows)
  fdw-empty       SELECT id FROM parts WHERE id < 0 (both shards, an index probe that finds
                  nothing): the postgres_fdw protocol of one query without the search
Each runs under --plans: custom (a custom plan every execution: the coordinator plans each
query) and/or generic (the prepared statement's generic plan).

For each --probes value (0: every list, exact) and plan: recall@10 against the exact top 10,
per-query latency (median over every query of every pass; --repeats passes over --nq
queries after 20 warm-up queries), QPS (queries over the median pass), and the CPU time
per query of each process involved (/proc/PID/task/*/schedstat): the coordinator's
backend, the shards' postgres_fdw backends and every server's device service.

Then a model of 1-16 shards from the measured figures (docs/scale-out.md explains it).
Output: docs/benchmarks/scaleout-DATASET-DEVICE.{csv,md,png} and -model.csv.

    bash bench/scaleout/run.sh [options]       # prepares, then runs this
"""
import argparse
import math
import os
import re
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gibench import datasets, db, environment  # noqa: E402
from gibench.cluster import Cluster  # noqa: E402
from gibench.report import Report  # noqa: E402
from gibench.stats import median, pct, recall_at_k  # noqa: E402

import scaleout_model  # noqa: E402

DEVICE_GUC = {"host": "cpu", "cuda": "cuda"}
# three clusters on a small machine: modest memory each
CONF = {"shared_buffers": "'256MB'", "maintenance_work_mem": "'512MB'", "work_mem": "'16MB'",
        "max_parallel_maintenance_workers": "0"}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Budget:
    def __init__(self, seconds):
        self.t0, self.seconds = time.time(), seconds

    def ok(self, need=0.0):
        return not self.seconds or self.seconds - (time.time() - self.t0) > need


# ---------------------------------------------------------------- CPU time per process

def cpu_seconds(pid):
    """CPU time a process has run, all its threads (the host backend's helper threads
    too), in seconds, from /proc/PID/task/*/schedstat (nanoseconds)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        return None
    return total / 1e9


class Pids:
    """The processes one engine's queries run in, by role."""

    def __init__(self, conns):
        self.conns = conns   # name -> connection (coord, shard1, shard2)

    def roles(self, engine):
        c = self.conns
        pids = {"coord_backend": [c["coord"].info.backend_pid]}
        if engine in ("one",):
            pids["service"] = [service_pid(c["coord"])]
        elif engine == "union1":
            pids["shard_backend"] = fdw_pids(c["shard1"])
            pids["service"] = [service_pid(c["shard1"])]
        elif engine in ("shard1", "shard2"):
            pids = {"shard_backend": [c[engine + "_client"].info.backend_pid],
                    "service": [service_pid(c[engine])]}
        else:
            pids["shard_backend"] = [p for s in ("shard1", "shard2") for p in fdw_pids(c[s])]
            pids["service"] = [service_pid(c[s]) for s in ("shard1", "shard2")]
        return pids


def service_pid(conn):
    return db.scalar(conn, "SELECT pid FROM gpuindex_service()")


def fdw_pids(conn):
    return [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
        "AND application_name = 'postgres_fdw'").fetchall()]


def snapshot(roles):
    return {role: sum(cpu_seconds(p) or 0 for p in pids) for role, pids in roles.items()}


# ---------------------------------------------------------------- set-up

def start_clusters(a):
    base = Path(a.dir)
    names = ["coord", "shard1", "shard2"]
    conf = dict(CONF, **{"gpuindex.host_threads": str(a.host_threads)})
    cls = {n: Cluster(base / n, a.port + i, device=DEVICE_GUC[a.device], extra=conf)
           for i, n in enumerate(names)}
    for n in names:
        cls[n].start()
    return cls


def setup(cls, ds, a, rep):
    n = len(ds.base)
    coord = db.connect(cls["coord"])
    shards = {s: db.connect(cls[s]) for s in ("shard1", "shard2")}
    for c in [coord] + list(shards.values()):
        c.execute("CREATE EXTENSION gpuindex")
    coord.execute("CREATE EXTENSION postgres_fdw")
    for i, s in enumerate(("shard1", "shard2")):
        cl = cls[s]
        coord.execute(f"CREATE SERVER {s} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ("
                      f"host '{cl.dir}', port '{cl.port}', dbname 'postgres', "
                      f"extensions 'gpuindex', async_capable 'true')")
        coord.execute(f"CREATE USER MAPPING FOR CURRENT_USER SERVER {s} OPTIONS (user 'postgres')")
    coord.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])")
    for parent, opts in (("parts", ""), ("parts_f11", f", fetch_size '{a.k + 1}'")):
        coord.execute(f"CREATE TABLE {parent} (id bigint, embedding real[]) PARTITION BY HASH (id)")
        for r, s in enumerate(("shard1", "shard2")):
            coord.execute(f"CREATE FOREIGN TABLE {parent}_s{r + 1} PARTITION OF {parent} "
                          f"FOR VALUES WITH (MODULUS 2, REMAINDER {r}) SERVER {s} "
                          f"OPTIONS (table_name 'items'{opts})")
    t = time.time()
    db.copy_vectors(coord, "items", list(range(n)), ds.base, "real[]")
    coord.execute("VACUUM (ANALYZE, FREEZE) items")
    halves = {}
    for r, s in enumerate(("shard1", "shard2")):
        ids = db.scalar(coord, "SELECT array_agg(i ORDER BY i) FROM generate_series(0, %s) i "
                               "WHERE satisfies_hash_partition('parts'::regclass, 2, %s, i::bigint)",
                        (n - 1, r))
        halves[s] = ids
        sh = shards[s]
        sh.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])")
        db.copy_vectors(sh, "items", ids, ds.base[ids], "real[]")
        sh.execute("VACUUM (ANALYZE, FREEZE) items")
    log(f"loaded {n} rows on the coordinator and {len(halves['shard1'])} + "
        f"{len(halves['shard2'])} on the shards in {time.time() - t:.0f} s")
    # the shards hold what the partition bounds route there: whole counts through the
    # coordinator, and single-row look-ups (pruned to one partition) find their rows
    got = coord.execute("SELECT (SELECT count(*) FROM parts_s1), (SELECT count(*) FROM parts_s2), "
                        "(SELECT count(*) FROM parts)").fetchone()
    assert got == (len(halves["shard1"]), len(halves["shard2"]), n), got
    for i in range(0, n, max(1, n // 25)):
        found = coord.execute("SELECT count(*) FROM parts WHERE id = %s", (i,)).fetchone()[0]
        assert found == 1, f"row {i} not found through its partition"
    lists = {"coord": a.lists or round(math.sqrt(n))}
    for s in ("shard1", "shard2"):
        lists[s] = a.lists and round(a.lists / math.sqrt(2)) or round(math.sqrt(len(halves[s])))
    # the three builds at once (k-means in each building backend on the host)
    t, errs = time.time(), []

    def build(conn, nl):
        try:
            conn.execute(f"CREATE INDEX items_embedding ON items USING gpuivf (embedding) "
                         f"WITH (lists = {nl})")
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)
    builds = [threading.Thread(target=build, args=(c, lists[nm])) for nm, c in
              [("coord", coord)] + list(shards.items())]
    for b in builds:
        b.start()
    for b in builds:
        b.join()
    if errs:
        raise errs[0]
    log(f"three gpuivf builds (lists {lists}) in {time.time() - t:.0f} s")
    rep.note(f"rows: {n} on one server (lists {lists['coord']}); "
             f"{len(halves['shard1'])} (lists {lists['shard1']}) and {len(halves['shard2'])} "
             f"(lists {lists['shard2']}) on the shards, split by the partition bounds' hash; "
             f"loaded and indexed in {time.time() - t:.0f} s (the three builds at once)")
    for s, c in shards.items():
        c.execute("ANALYZE items")
    # the coordinator's statistics of the foreign partitions (sampled from the shards),
    # as docs/scale-out.md asks for
    coord.execute("ANALYZE parts")
    coord.execute("ANALYZE parts_f11")
    return coord, shards, lists


# ---------------------------------------------------------------- queries

def sql_of(engine, k):
    dist = "embedding <-> %(q)s::real[]"
    if engine in ("one", "shard1", "shard2"):
        return f"SELECT id FROM items ORDER BY {dist} LIMIT {k}"
    if engine == "plain":
        return f"SELECT id FROM parts ORDER BY {dist} LIMIT {k}"
    if engine == "plain-fetch11":
        return f"SELECT id FROM parts_f11 ORDER BY {dist} LIMIT {k}"
    if engine in ("union", "union-sync", "union1"):
        branch = "(SELECT id, {d} AS d FROM {t} ORDER BY {d} LIMIT {k})"
        tables = ("parts_s1",) if engine == "union1" else ("parts_s1", "parts_s2")
        u = " UNION ALL ".join(branch.format(d=dist, t=t, k=k) for t in tables)
        # union-sync gets a statement of its own: a prepared statement's generic plan
        # keeps the enable_async_append of its first planning
        tag = " /* sync */" if engine == "union-sync" else ""
        # d + 0: the branches are not sorted by it, so the planner sorts their k rows
        # each over an Append (async) instead of a Merge Append of sorted branches
        return f"SELECT id FROM ({u}) u ORDER BY d + 0, id LIMIT {k}{tag}"
    if engine == "fdw-empty":
        return "SELECT id FROM parts WHERE id < 0 AND %(q)s::text IS NOT NULL"
    raise ValueError(engine)


def plan_text(conn, engine, sql, params):
    """EXPLAIN (VERBOSE, COSTS OFF) on one line: the plan's nodes and the remote SQL, vector
    literals and parameters shortened."""
    async_append(conn, engine)
    try:
        rows = [r[0] for r in conn.execute("EXPLAIN (VERBOSE, COSTS OFF) " + sql,
                                           params).fetchall()]
    finally:
        async_append(conn, None)
    keep = []
    for r in rows:
        s = r.strip()
        if s.startswith("->") or not r.startswith(" ") or s.startswith("Remote SQL"):
            s = re.sub(r"'\{[^}]*\}'(::real\[\])?", "q", s.lstrip("-> "))
            s = s.replace("OPERATOR(public.<->)", "<->")
            keep.append(s)
    return " / ".join(keep)


def timed_query(cur, sql, lit, roles):
    """(ids, seconds, CPU seconds by role) of one execution; the CPU snapshots lie
    outside the timed region."""
    c0 = snapshot(roles)
    t0 = time.perf_counter()
    rows = cur.execute(sql, {"q": lit}, prepare=True).fetchall()
    dt = time.perf_counter() - t0
    c1 = snapshot(roles)
    return [r[0] for r in rows], dt, {k: c1[k] - c0[k] for k in roles}


def set_probes(coord, shards, shard_probes, one_probes, conns):
    """gpuivf.probes: the coordinator's session for its local index; the shards' through
    the foreign servers' libpq options (every postgres_fdw connection made after the
    change; postgres_fdw drops its connections when a server's options change)."""
    coord.execute(f"SET gpuivf.probes = {one_probes}")
    for s in ("shard1", "shard2"):
        opt = db.scalar(coord, "SELECT count(*) FROM pg_foreign_server, unnest(srvoptions) o "
                               "WHERE srvname = %s AND o LIKE 'options=%%'", (s,))
        verb = "SET" if opt else "ADD"
        coord.execute(f"ALTER SERVER {s} OPTIONS ({verb} options '-c gpuivf.probes={shard_probes}')")
        conns[s + "_client"].execute(f"SET gpuivf.probes = {shard_probes}")
    coord.execute("SELECT postgres_fdw_disconnect_all()")


# ---------------------------------------------------------------- the run

ENGINES = ["one", "plain", "plain-fetch11", "union", "union-sync", "union1", "shard1",
           "shard2", "fdw-empty"]


def measure(cls, coord, shards, lists, ds, a, rep, budget):
    """Every engine on the same queries, interleaved: query i goes to every engine in turn
    (the order rotated by i), so that a change in the machine's load during the run (other
    work on it) falls on every engine alike."""
    conns = {"coord": coord, **shards}
    for s in ("shard1", "shard2"):
        conns[s + "_client"] = db.connect(cls[s], jit="off")
    coord.execute("SET jit = off")
    pids = Pids(conns)
    engines = [e for e in ENGINES if e in a.engines.split(",")]
    probes = [int(p) for p in a.probes.split(",")]
    plans = [p for p in a.plans.split(",") if p]
    for p in probes:
        if not budget.ok(30):
            rep.note(f"probes {p or 'all'}: not run (deadline)")
            continue
        pone = p or lists["coord"]
        pshard = p or max(lists["shard1"], lists["shard2"])
        set_probes(coord, shards, pshard, pone, conns)
        queries = ds.queries if p else ds.queries[:a.exact_nq]
        lits = [db.literal(q, "real[]") for q in queries]
        for plan in plans:
            mode = "force_custom_plan" if plan == "custom" else "force_generic_plan"
            for c in (coord, conns["shard1_client"], conns["shard2_client"]):
                c.execute(f"SET plan_cache_mode = {mode}")
            cur, roles, active = {}, {}, []
            for e in engines:
                conn = conns[e + "_client"] if e in ("shard1", "shard2") else coord
                cur[e] = conn.cursor()
                try:
                    async_append(coord, e)
                    for lit in lits[:20]:
                        cur[e].execute(sql_of(e, a.k), {"q": lit}, prepare=True).fetchall()
                    roles[e] = pids.roles(e)
                    active.append(e)
                except Exception as ex:  # noqa: BLE001 - noted, the others go on
                    traceback.print_exc()
                    rep.note(f"{e} at probes {p or 'all'}, {plan} plans: {type(ex).__name__}: "
                             f"{str(ex).strip().splitlines()[0]}")
                finally:
                    async_append(coord, None)
            lat = {e: [] for e in active}
            paired = {e: {} for e in active}
            cpu = {e: {} for e in active}
            passes = {e: [] for e in active}
            found = {}
            for r in range(a.repeats):
                if r and not budget.ok(10):
                    break
                res = {e: [] for e in active}
                took = {e: 0.0 for e in active}
                for i, lit in enumerate(lits):
                    turn = i % len(active)
                    for e in list(active[turn:] + active[:turn]):
                        if e not in active:
                            continue
                        try:
                            async_append(coord, e)
                            ids, dt, used = timed_query(cur[e], sql_of(e, a.k), lit, roles[e])
                        except Exception as ex:  # noqa: BLE001 - noted, the others go on
                            traceback.print_exc()
                            rep.note(f"{e} at probes {p or 'all'}, {plan} plans failed: "
                                     f"{type(ex).__name__}: {str(ex).strip().splitlines()[0]}")
                            active.remove(e)
                            continue
                        finally:
                            async_append(coord, None)
                        res[e].append(ids)
                        lat[e].append(dt)
                        paired[e][(r, i)] = dt
                        took[e] += dt
                        for k, v in used.items():
                            cpu[e][k] = cpu[e].get(k, 0.0) + v
                for e in active:
                    passes[e].append(took[e])
                    found[e] = res[e]
            for e in active:
                nq = len(lits)
                rec = None
                if e not in ("shard1", "shard2", "fdw-empty", "union1"):
                    rec = recall_at_k(found[e], ds.gt[:nq], a.k)
                conn = conns[e + "_client"] if e in ("shard1", "shard2") else coord
                # the latency over one server's for the same query in the same turn (run
                # back to back, so a load change on the machine falls on both)
                both = [paired[e][x] / paired["one"][x] for x in paired[e]
                        if "one" in paired and x in paired["one"]]
                row = rep.add(engine=e, plan=plan, probes=pone if e == "one" else pshard,
                              probes_setting=p or "all", recall=rec, nq=nq,
                              repeats=len(passes[e]),
                              p50_ms=pct(lat[e], 50) * 1e3, p90_ms=pct(lat[e], 90) * 1e3,
                              mean_ms=sum(lat[e]) / len(lat[e]) * 1e3,
                              qps=nq / median(passes[e]),
                              qps_runs=";".join(f"{nq / x:.4g}" for x in passes[e]),
                              **{f"cpu_{k}_ms": v / len(lat[e]) * 1e3 for k, v in cpu[e].items()},
                              ratio_paired=median(both) if both and e != "one" else None,
                              load1=round(os.getloadavg()[0], 2),
                              plan_shape=plan_text(conn, e, sql_of(e, a.k), {"q": lits[0]}))
                log(f"probes {p or 'all'} {plan:7s} {e:14s} p50 {row['p50_ms']:.3f} ms "
                    f"recall {rec if rec is None else round(rec, 4)} cpu "
                    + " ".join(f"{k}={v / len(lat[e]) * 1e3:.3f}" for k, v in cpu[e].items()))


def async_append(coord, engine):
    """union-sync runs with enable_async_append off; everything else with it on."""
    want = "off" if engine == "union-sync" else "on"
    if ASYNC_APPEND.get(id(coord), "on") != want:
        coord.execute(f"SET enable_async_append = {want}")
        ASYNC_APPEND[id(coord)] = want


ASYNC_APPEND = {}


def finish(rep, a):
    rows = rep.rows
    # the ratio to one server at the same probes setting and plan
    for r in rows:
        one = [x for x in rows if x["engine"] == "one" and x["plan"] == r["plan"]
               and x["probes_setting"] == r["probes_setting"]]
        if one and r["engine"] in ("plain", "plain-fetch11", "union", "union-sync"):
            r["ratio_p50"] = r["p50_ms"] / one[0]["p50_ms"]
    cols = ["engine", "plan", "probes", "recall", "p50_ms", "p90_ms", "mean_ms", "qps",
            "ratio_p50", "ratio_paired", "cpu_coord_backend_ms", "cpu_shard_backend_ms",
            "cpu_service_ms", "load1"]
    rep.table("latency of one query (one client), every engine, probes and plan", cols)
    matched = matched_rows(rows, a.target_recall)
    if matched:
        rep.table(f"at the fewest probes with recall@10 >= {a.target_recall} "
                  "(per engine and plan; ratio_matched: p50 over one server's p50 at its own "
                  "such probes)", cols + ["ratio_matched"], matched)
    model = scaleout_model.fit(rows, a)
    if model:
        rep.note(model["note"])
        rep.table("model: N shards, each on its own machine like this one's shard (see "
                  "docs/scale-out.md)", scaleout_model.COLUMNS, model["rows"])
        scaleout_model.write_csv(model["rows"], rep)
    first = rows[0]["probes_setting"] if rows else None
    rep.table("plans (EXPLAIN (VERBOSE) with the first query's vector, shown as q; "
              f"{rows[0]['plan'] if rows else ''} plans at the first probes setting)",
              ["engine", "plan_shape"],
              [r for r in rows if r["plan"] == rows[0]["plan"] and r["probes_setting"] == first])
    rep.plot(lambda rs, stem: plot(rs, stem, a))
    rep.plot(lambda rs, stem: scaleout_model.plot(model, stem) if model else [])


def matched_rows(rows, target):
    out = []
    for plan in dict.fromkeys(r["plan"] for r in rows):
        best = {}
        for r in rows:
            if r["plan"] != plan or r.get("recall") is None or r["recall"] < target:
                continue
            if r["engine"] not in best or r["probes"] < best[r["engine"]]["probes"]:
                best[r["engine"]] = r
        if "one" in best:
            for e, r in best.items():
                out.append(dict(r, ratio_matched=r["p50_ms"] / best["one"]["p50_ms"]))
    return out


STYLE = {"one": ("black", "o"), "plain": ("tab:blue", "s"), "plain-fetch11": ("tab:cyan", "D"),
         "union": ("tab:red", "^"), "union-sync": ("tab:orange", "v")}


def plot(rows, stem, a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plans = list(dict.fromkeys(r["plan"] for r in rows))
    fig, axes = plt.subplots(1, len(plans), figsize=(5.6 * len(plans), 4.4), squeeze=False)
    for ax, plan in zip(axes[0], plans):
        for e, (c, m) in STYLE.items():
            pts = sorted((r["recall"], r["p50_ms"]) for r in rows
                         if r["engine"] == e and r["plan"] == plan and r.get("recall") is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=m, label=e)
        ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("latency of one query, p50 (ms)")
        ax.set_title(f"{plan} plans", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"one server vs. 2 postgres_fdw shards on one {os.cpu_count()}-core machine",
                 fontsize=10)
    fig.tight_layout()
    path = f"{stem}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [Path(path).name]


def report_only(a):
    import csv
    src = Path(a.report_only)
    rows = []
    with open(src) as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                if v == "":
                    continue
                try:
                    row[k] = int(v) if re.fullmatch(r"-?[0-9]+", v) else float(v)
                except ValueError:
                    row[k] = v
            rows.append(row)
    md = src.with_suffix(".md")
    env, notes, options = {}, [], {"tag": a.device}
    if md.exists():
        for line in md.read_text().splitlines():
            if line.startswith("- options: "):
                options = line[len("- options: "):]
            elif line.startswith("- ") and ": " in line:
                k, v = line[2:].split(": ", 1)
                env[k] = v
            elif line.startswith("> ") and not line.startswith("> model"):
                notes.append(line[2:])
    rep = Report("scaleout", a.dataset, env, {"tag": a.device}, notes)
    rep.stem, rep.options = src.stem, options
    rep.rows = rows
    finish(rep, a)
    log(f"wrote {rep.write()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--dataset", default="synth-200k-128", help="a gibench dataset")
    ap.add_argument("--nq", type=int, default=200, help="queries (the first of the dataset's)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exact-nq", type=int, default=50,
                    help="queries at probes 0 (every list: the slow exact search)")
    ap.add_argument("--probes", default="4,8,12,16,24,32,0",
                    help="gpuivf.probes of every index in turn (0: every list, exact)")
    ap.add_argument("--lists", type=int, default=0,
                    help="lists of the one-server index (0: sqrt(rows)); the shards get "
                         "this / sqrt(2), by default sqrt(their rows)")
    ap.add_argument("--plans", default="custom,generic")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--model-plan", default="generic", help="the plan mode the model uses")
    ap.add_argument("--model-cores", type=int, default=os.cpu_count(),
                    help="cores per machine in the model's throughput (default: this one's)")
    ap.add_argument("--model-rtt-ms", type=float, default=0.1,
                    help="network round trip the model adds per serial postgres_fdw message")
    ap.add_argument("--device", choices=sorted(DEVICE_GUC), default="host")
    ap.add_argument("--host-threads", type=int, default=1,
                    help="gpuindex.host_threads of every server: 1 gives each server's "
                         "searches one core, so that the shards can search side by side "
                         "on a small machine as on machines of their own (0: every core)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds: no new measurement starts after that")
    ap.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 54405)))
    ap.add_argument("--dir", default=os.environ.get("BENCH_SCALEOUT_DIR",
                                                    "/tmp/gpuindex-bench-scaleout"))
    ap.add_argument("--tag", default="",
                    help="the output files' suffix (default: the device): a run of other "
                         "options beside the main one")
    ap.add_argument("--keep", action="store_true", help="leave the clusters running")
    ap.add_argument("--report-only", metavar="CSV",
                    help="measure nothing: rebuild the tables, model and plots from this CSV "
                         "of an earlier run (its .md's environment lines are kept)")
    a = ap.parse_args()
    a.model_rows = datasets._count(a.dataset.split("-")[1]) if a.dataset.startswith("synth-") else 0
    if a.report_only:
        return report_only(a)
    budget = Budget(a.deadline)
    t0 = time.time()
    ds = datasets.load(a.dataset, nq=a.nq)
    a.model_rows = len(ds.base)
    cls = start_clusters(a)
    try:
        opts = {k: v for k, v in vars(a).items() if k not in ("dir", "port", "keep")}
        rep = Report("scaleout", ds.name, {}, dict(opts, tag=a.tag or a.device))
        coord, shards, lists = setup(cls, ds, a, rep)
        rep.env = environment.describe(coord, cls["coord"])
        for k in ("ext_vector", "faiss"):
            rep.env.pop(k, None)
        rep.env["ext_postgres_fdw"] = db.scalar(
            coord, "SELECT extversion FROM pg_extension WHERE extname = 'postgres_fdw'")
        rep.env["servers"] = (f"3 clusters on this machine ({os.cpu_count()} cores): "
                              f"{', '.join(f'{n} port {c.port}' for n, c in cls.items())}; "
                              + ", ".join(f"{k} = {v}" for k, v in CONF.items())
                              + f", gpuindex.host_threads = {a.host_threads}")
        rep.env["load_average_start"] = str(tuple(round(x, 2) for x in os.getloadavg()))
        rep.note("latency: the client's time for one query (execute + fetch of the k ids), "
                 "median (p50) and p90 over every query of every pass; qps: queries over the "
                 "median pass; cpu_*_ms: CPU time per query of the coordinator's backend, the "
                 "shards' postgres_fdw backends (both together) and the device services "
                 "(their threads too) that served the engine, from /proc/PID/task/*/schedstat; "
                 "all processes share this machine's cores")
        measure(cls, coord, shards, lists, ds, a, rep, budget)
        finish(rep, a)
        rep.note(f"the run took {time.time() - t0:.0f} s; load average (1, 5, 15 min) at its "
                 f"end {tuple(round(x, 2) for x in os.getloadavg())}")
        log(f"wrote {rep.write()}")
    finally:
        if not a.keep:
            for c in cls.values():
                c.stop()


if __name__ == "__main__":
    main()
