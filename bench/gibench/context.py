"""What a scenario is handed: options, the cluster and a connection, the dataset, the
engines, and small shared steps (making a table, building an index, measuring recall)."""
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import db, sqlsearch, stats


@dataclass
class Context:
    opts: object
    cluster: object
    conn: object
    ds: object
    sql_engines: list
    ref_engines: list
    env: dict
    notes: list = field(default_factory=list)
    deadline: float = None      # time.time() after which no new measurement starts
    share_end: float = None     # the current engine's share of what is left (share())

    def log(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def time_left(self):
        ends = [t for t in (self.deadline, self.share_end) if t is not None]
        return min(ends) - time.time() if ends else float("inf")

    @contextmanager
    def share(self, parts):
        """Within the block, time_left() counts to 1/parts of what the --deadline leaves
        (one engine of `parts` still to run gets an equal share; what it leaves unused
        goes to the next).  parts may be fractional (weighted shares)."""
        old = self.share_end
        if self.deadline is not None:
            self.share_end = time.time() + max(0.0, self.deadline - time.time()) / max(1.0, parts)
        try:
            yield
        finally:
            self.share_end = old

    def out_of_time(self, rep, what, reserve=0.0):
        """True (and a note in the report) when the run's --deadline leaves no more than
        reserve seconds: scenarios then skip what is left and write what they have."""
        if self.time_left() > reserve:
            return False
        msg = f"--deadline reached: {what} not measured"
        self.log(msg)
        rep.note(msg)
        return True

    def guarded(self, rep, what, fn, *args, **kwargs):
        """fn(*args) with its failure reported instead of raised, so that one engine's
        error (a failed CREATE INDEX, a lost connection) does not lose the others'
        results; reconnects afterwards.  Returns fn's result or None."""
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            import traceback
            traceback.print_exc()
            first = (str(e).strip().splitlines() or [""])[0][:300]
            self.log(f"{what} FAILED: {type(e).__name__}: {first}")
            rep.note(f"{what} failed: {type(e).__name__}: {first}")
            self.reconnect()
            return None

    def reconnect(self, wait=60):
        """A fresh connection (the old one may be broken, or the server restarting after
        a crash)."""
        try:
            self.conn.close()
        except Exception:
            pass
        t0 = time.time()
        while True:
            try:
                self.conn = db.connect(self.cluster)
                return
            except Exception:
                if time.time() - t0 > wait:
                    raise
                time.sleep(1)

    @property
    def queries(self):
        return self.ds.queries

    def copy_table(self, eng, name, row_limit=None, lo=0):
        """A fresh table `name` like src_* holding rows lo .. lo+row_limit."""
        self.conn.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
        self.conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, "
                          f"embedding {eng.column_type(self.ds.dim)}) "
                          f"WITH (autovacuum_enabled = off)")
        hi = lo + (row_limit if row_limit is not None else len(self.ds.base))
        self.bounded(f"INSERT INTO {name} SELECT id, embedding FROM {eng.table('src')} "
                     f"WHERE id >= %s AND id < %s ORDER BY id", (lo, hi))
        self.conn.execute(f"VACUUM (ANALYZE, FREEZE) {name}")

    def bounded(self, sql, params=None):
        """Executes sql (returns its seconds) under a statement_timeout of the time the
        --deadline (or the engine's share) leaves, so that a long statement (an HNSW
        build) cannot run past it: it is cancelled, and reported as not finished."""
        left = self.time_left()
        if left == float("inf"):
            return db.timed(self.conn, sql, params)
        ms = int(max(5.0, left) * 1000)
        self.conn.execute(f"SET statement_timeout = {ms}")
        try:
            return db.timed(self.conn, sql, params)
        except Exception as e:
            if "statement timeout" in str(e):
                raise RuntimeError(f"not finished in the {ms / 1000:.0f} s the --deadline "
                                   f"left: {sql.split('(')[0].strip()[:80]}") from e
            raise
        finally:
            try:
                self.conn.execute("RESET statement_timeout")
            except Exception:
                pass

    def build_index(self, eng, table, params, name=None):
        """CREATE INDEX (dropping any previous one); returns (index name, seconds)."""
        name = name or f"{table}_{eng.name}_idx"
        self.conn.execute(f"DROP INDEX IF EXISTS {name}")
        self.conn.execute("CHECKPOINT")
        secs = self.bounded(eng.create_index(name, table, self.ds.metric, params))
        self.conn.execute(f"ANALYZE {table}")
        self.check_plan(eng, table, name)
        return name, secs

    def plan_uses(self, eng, table, index):
        """Whether both query shapes the scenarios use (a literal, and pgbench's sub-select
        from the queries table) run as a scan of `index` under the session's settings."""
        from .engines import OPERATORS
        op, q = OPERATORS[self.ds.metric], db.literal(self.ds.queries[0], eng.coltype)
        shapes = [eng.knn_sql(table, self.ds.metric) % ("'" + q + "'", 10),
                  f"SELECT id FROM {table} ORDER BY embedding {op} "
                  f"(SELECT v FROM {eng.table('q')} WHERE q = 1) LIMIT 10"]
        for sql in shapes:
            plan = "\n".join(r[0] for r in self.conn.execute("EXPLAIN " + sql))
            if f"Index Scan using {index}" not in plan:
                return False
        return True

    def check_plan(self, eng, table, index):
        if not self.plan_uses(eng, table, index):
            raise RuntimeError(f"{eng.name}: the k-NN query does not use {index}")

    def force_index(self, eng, table, index):
        """At a knob value where the planner prefers a sequential scan (pgvector's costs
        at many probes), turn seq scans off so that the index is what gets measured.
        Returns the extra settings pgbench must use too ({} when none were needed)."""
        self.conn.execute("RESET enable_seqscan")
        if self.plan_uses(eng, table, index):
            return {}
        self.conn.execute("SET enable_seqscan = off")
        self.check_plan(eng, table, index)
        return {"enable_seqscan": "off"}

    def index_size(self, index):
        pages = db.relation_pages(self.conn, index)
        dev = db.device_stats(self.conn, index)
        return {"index_pages": pages, "index_mb": pages * 8192 / 2**20 if pages else None,
                "device_bytes": dev.get("bytes"), "slabs_used": dev.get("slabs_used"),
                "device_rows": dev.get("rows")}

    def recall(self, eng, table, knob_value, truth, queries=None, k=10):
        """(recall@10, per-query latencies) of one client at one knob setting."""
        queries = self.queries if queries is None else queries
        sqlsearch.set_knob(self.conn, eng, knob_value)
        found, lat = sqlsearch.single_client(self.conn, eng, table, self.ds.metric, queries, k)
        return stats.recall_at_k(found, truth, k), lat


def exact_subset(ds, lo, hi, queries, k=10):
    """Exact top-k ids among base rows lo..hi-1 (ids are row numbers)."""
    from .groundtruth import exact_knn
    return exact_knn(ds.base[lo:hi], queries, k, ds.metric, ids=np.arange(lo, hi))
