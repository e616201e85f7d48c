"""Running k-NN queries through SQL: one client (our own timed loop, per-query latency
and the ids for recall), many clients (pgbench with a custom script), and one round trip
for a whole batch (gpuivf_search for gpuivf, a LATERAL join for pgvector)."""
import os
import re
import resource
import subprocess
import time

from . import db
from .engines import batch_param


def set_knob(conn, engine, value):
    conn.execute(f"SET {engine.knob} = {int(value)}")


def single_client(conn, engine, table, metric, queries, k=10, warmup=20):
    """(ids per query, latencies in seconds) for queries run one by one, prepared."""
    sql = engine.knn_sql(table, metric)
    lits = [db.literal(q, engine.coltype) for q in queries]
    with conn.cursor() as cur:
        for lit in lits[:warmup]:
            cur.execute(sql, (lit, k), prepare=True).fetchall()
        found, lat = [], []
        for lit in lits:
            t0 = time.perf_counter()
            rows = cur.execute(sql, (lit, k), prepare=True).fetchall()
            lat.append(time.perf_counter() - t0)
            found.append([r[0] for r in rows])
    return found, lat


def batch(conn, engine, index, table, metric, queries, k=10):
    """(ids per query, seconds) for all queries in one statement."""
    sql = engine.batch_sql(index, table, metric)
    param = batch_param(queries, engine.coltype)   # built outside the timed region
    t0 = time.perf_counter()
    rows = conn.execute(sql, (param, k)).fetchall()
    secs = time.perf_counter() - t0
    found = [[] for _ in queries]
    base = min((r[0] for r in rows), default=1)   # query numbers may start at 0 or 1
    for q, rid in rows:
        found[q - base].append(rid)
    return found, secs


def batch_counted_sql(engine, index, table, metric):
    """The batch statement with its rows counted on the server instead of sent."""
    return f"SELECT count(*) FROM ({engine.batch_sql(index, table, metric)}) b"


def timed_warm(conn, sql, params):
    """(seconds, rows) of a prepared statement's second of two executions back to back,
    its rows fetched: the first wakes what idles between statements (the device service
    waits on a latch, a new statement is planned), which would otherwise fall on
    whichever of two compared forms runs first."""
    conn.execute(sql, params, prepare=True).fetchall()
    t0 = time.perf_counter()
    rows = conn.execute(sql, params, prepare=True).fetchall()
    return time.perf_counter() - t0, rows


def batch_split(conn, engine, index, table, metric, queries, k=10):
    """(seconds sent, seconds counted): the batch statement with its rows sent to the
    client and with them counted on the server, both warm (timed_warm); the difference
    is the result rows' way to the client."""
    param = batch_param(queries, engine.coltype)
    sent = timed_warm(conn, engine.batch_sql(index, table, metric), (param, k))[0]
    counted = timed_warm(conn, batch_counted_sql(engine, index, table, metric), (param, k))[0]
    return sent, counted


SERVICE_TITLE = b"postgres: gpuindex device service"


def _cpu_snapshot():
    """(machine's busy and total clock ticks, the device service's CPU ticks, the
    children's CPU seconds): Linux's /proc, all CPUs together."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:9]]
    total, idle = sum(vals), vals[3] + vals[4]
    service = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if not f.read().startswith(SERVICE_TITLE):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            service += int(fields[11]) + int(fields[12])      # utime, stime
        except OSError:
            continue
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total - idle, total, service, ru.ru_utime + ru.ru_stime


def cpu_use(before, after, wall):
    """Cores kept busy between two _cpu_snapshot()s over `wall` seconds: the whole
    machine, the device service, the client program (pgbench)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    ncpu = os.cpu_count() or 1
    tick = os.sysconf("SC_CLK_TCK")
    return dict(cores=ncpu * busy / total if total else 0.0,
                service=(after[2] - before[2]) / tick / wall if wall else 0.0,
                client=(after[3] - before[3]) / wall if wall else 0.0)


SERVICE_COUNTERS = ("SELECT requests, rounds, round_seconds, search_seconds "
                    "FROM gpuindex_service()")


def service_counters(conn):
    """The device service's counters (requests, rounds, seconds in rounds, seconds in
    the compute backend's searches), or None where gpuindex is not installed."""
    try:
        return conn.execute(SERVICE_COUNTERS).fetchone()
    except Exception:       # noqa: BLE001 - an older gpuindex, or none: no figures
        conn.rollback()
        return None


def service_use(before, after, wall):
    """What the service's one thread did between two service_counters(): shares of
    the wall time in rounds and in searches, and requests a round."""
    if before is None or after is None or not wall:
        return {}
    req, rounds = after[0] - before[0], after[1] - before[1]
    return dict(svc_round=(after[2] - before[2]) / wall,
                svc_search=(after[3] - before[3]) / wall,
                svc_batch=req / rounds if rounds else 0.0)


def pgbench(cluster, engine, table, qtable, metric, nq, clients, seconds, knob_value,
            k=10, workdir=None, gucs=None, cpu=None):
    """Transactions (queries) per second of `clients` pgbench sessions, each query a
    random row of the queries table; with a dict `cpu`, the cores kept busy meanwhile
    (cpu_use) go into it."""
    script = (workdir or cluster.dir) / f"knn-{engine.name}.sql"
    script.write_text(engine.pgbench_script(table, qtable, metric, nq, k))
    script.chmod(0o644)
    cmd = [cluster.bin("pgbench"), "-n", "-M", "prepared", "-f", str(script),
           "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)]
    before, t0 = _cpu_snapshot(), time.perf_counter()
    res = subprocess.run(cmd, env=cluster.env(**{engine.knob: knob_value}, **(gucs or {})),
                         text=True,
                         capture_output=True)
    if cpu is not None:
        cpu.update(cpu_use(before, _cpu_snapshot(), time.perf_counter() - t0))
    if res.returncode != 0:
        raise RuntimeError(f"pgbench failed: {res.stderr[-2000:]}")
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", res.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", res.stdout)
    if failed and int(failed.group(1)):
        raise RuntimeError(f"pgbench: {failed.group(1)} failed transactions")
    return float(m.group(1))
