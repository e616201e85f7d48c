"""The SQL engines compared: gpuivf (ours, real[]), pgvector IVFFlat and HNSW (vector).
Each knows its DDL, its per-query knob (a GUC) and how to run a batch of queries in one
round trip."""
import math
from dataclasses import dataclass

import numpy as np

OPERATORS = {"l2": "<->", "ip": "<#>", "cosine": "<=>"}
IVF_PROBES = (1, 2, 4, 8, 16, 32, 64, 128)
HNSW_EF = (10, 20, 40, 80, 160, 320)


def default_lists(n):
    """pgvector's advice (rows / 1000 up to 1M rows, sqrt(rows) above) is for speed of
    build; the issue's orientation used sqrt(rows) (729 for 531K): we use sqrt too."""
    return max(1, round(math.sqrt(n)))


def _ints(text):
    return [int(v) for v in text.split(",") if v.strip()]


def sweep_values(structure, params, opts):
    """The knob values a search sweep visits: --probes (IVF) / --ef-search (HNSW) when
    given, else --knobs (both kinds), else the defaults; IVF probes capped at the lists."""
    own = getattr(opts, "probes" if structure == "ivf" else "ef_search", None)
    if own:
        vals = _ints(own)
    elif opts.knobs:
        vals = _ints(opts.knobs)
    else:
        vals = list(HNSW_EF if structure == "hnsw" else IVF_PROBES)
    if structure == "ivf":
        vals = [p for p in vals if p <= params["lists"]] or [params["lists"]]
    return vals


@dataclass
class SqlEngine:
    name: str
    am: str
    coltype: str        # 'real[]' or 'vector'
    opclass: str        # prefix: real_l2_ops / vector_l2_ops
    knob: str           # GUC swept at search time
    extension: str
    extra: dict = None  # further index options (gpuivf_pq: the quantizer)

    def __post_init__(self):
        self.extra = dict(self.extra or {})

    @property
    def suffix(self):
        return "arr" if self.coltype == "real[]" else "vec"

    def table(self, role="src"):
        return f"{role}_{self.suffix}"

    def column_type(self, dim):
        return "real[]" if self.coltype == "real[]" else f"vector({dim})"

    def cast(self):
        return "real[]" if self.coltype == "real[]" else "vector"

    def params(self, n, opts):
        if self.am == "hnsw":
            return {"m": opts.m, "ef_construction": opts.ef_construction}
        return {"lists": opts.lists or default_lists(n), **self.extra}

    def create_index(self, index, table, metric, params):
        with_ = ", ".join(f"{k} = {v}" for k, v in params.items())
        return (f"CREATE INDEX {index} ON {table} USING {self.am} "
                f"(embedding {self.opclass}_{metric}_ops) WITH ({with_})")

    def knob_values(self, params, opts):
        return sweep_values("hnsw" if self.am == "hnsw" else "ivf", params, opts)

    def default_knob(self, params):
        """The setting the single-point scenarios use (the issue's orientation figures)."""
        return 80 if self.am == "hnsw" else min(32, params["lists"])

    def knn_sql(self, table, metric):
        return (f"SELECT id FROM {table} ORDER BY embedding {OPERATORS[metric]} "
                f"%s::{self.cast()} LIMIT %s")

    def pgbench_script(self, table, qtable, metric, nq, k):
        return ("\\set q random(1, %d)\n"
                "SELECT id FROM %s ORDER BY embedding %s "
                "(SELECT v FROM %s WHERE q = :q) LIMIT %d;\n"
                % (nq, table, OPERATORS[metric], qtable, k))

    def batch_sql(self, index, table, metric):
        """One statement answering many queries: param 1 the queries (batch_param), 2 k.
        Returns (query number from 1, id)."""
        if self.am == "gpuivf":
            return (f"SELECT query, key FROM gpuivf_search_packed('{index}'::regclass, "
                    f"%s::bytea, %s, 'id', NULL::bigint)")
        # pgvector has no binary batch form: the server parses the vector[] text
        # literal, and that input cost is part of its batch figure
        return (f"SELECT q.i, s.id FROM unnest(%s::vector[]) WITH ORDINALITY q(v, i) "
                f"CROSS JOIN LATERAL (SELECT id FROM {table} "
                f"ORDER BY embedding {OPERATORS[metric]} q.v LIMIT %s) s")


SQL_ENGINES = {
    "gpuivf": SqlEngine("gpuivf", "gpuivf", "real[]", "real", "gpuivf.probes", "gpuindex"),
    # IVF-PQ lists (docs/pq.md): one code byte per 2-d sub-space, 256 entries each
    "gpuivf_pq": SqlEngine("gpuivf_pq", "gpuivf", "real[]", "real", "gpuivf.probes", "gpuindex",
                           {"quantizer": "'pq'"}),
    # the same sub-spaces with 16 entries each: 4-bit codes, two a byte
    "gpuivf_pq4": SqlEngine("gpuivf_pq4", "gpuivf", "real[]", "real", "gpuivf.probes", "gpuindex",
                            {"quantizer": "'pq'", "pq_bits": "4"}),
    # 1-d sub-spaces of 16 entries: 4-bit codes, the 8-bit index's bytes (DIM: the dimension)
    "gpuivf_pq4d1": SqlEngine("gpuivf_pq4d1", "gpuivf", "real[]", "real", "gpuivf.probes",
                              "gpuindex", {"quantizer": "'pq'", "pq_bits": "4", "pq_m": "DIM"}),
    "ivfflat": SqlEngine("ivfflat", "ivfflat", "vector", "vector", "ivfflat.probes", "vector"),
    "hnsw": SqlEngine("hnsw", "hnsw", "vector", "vector", "hnsw.ef_search", "vector"),
}


def batch_param(queries, coltype):
    """The queries of a batch as one parameter: for gpuivf (real[]) the bytea of
    little-endian float4 rows, for pgvector a vector[] text literal."""
    if coltype == "real[]":
        return np.asarray(queries, dtype="<f4").tobytes()
    rows = [",".join(repr(float(f)) for f in q) for q in queries]
    return "{" + ",".join('"[' + r + ']"' for r in rows) + "}"
