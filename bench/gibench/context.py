"""What a scenario is handed: options, the cluster and a connection, the dataset, the
engines, and small shared steps (making a table, building an index, measuring recall)."""
import time
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

    def log(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

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
        self.conn.execute(f"INSERT INTO {name} SELECT id, embedding FROM {eng.table('src')} "
                          f"WHERE id >= %s AND id < %s ORDER BY id", (lo, hi))
        self.conn.execute(f"VACUUM (ANALYZE, FREEZE) {name}")

    def build_index(self, eng, table, params, name=None):
        """CREATE INDEX (dropping any previous one); returns (index name, seconds)."""
        name = name or f"{table}_{eng.name}_idx"
        self.conn.execute(f"DROP INDEX IF EXISTS {name}")
        self.conn.execute("CHECKPOINT")
        secs = db.timed(self.conn, eng.create_index(name, table, self.ds.metric, params))
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
