"""Connections, fast loading (binary COPY built with numpy: exact float4 bits, no text
round trip), and size look-ups."""
import time

import numpy as np
import psycopg

PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
FLOAT4OID = 700


def connect(cluster, **gucs):
    conn = psycopg.connect(cluster.conninfo, autocommit=True)
    for k, v in gucs.items():
        conn.execute(f"SET {k} = {v}")
    return conn


def timed(conn, sql, params=None):
    t0 = time.perf_counter()
    conn.execute(sql, params)
    return time.perf_counter() - t0


def scalar(conn, sql, params=None):
    row = conn.execute(sql, params).fetchone()
    return row[0] if row else None


def _copy_rows(ids, x, coltype):
    """Binary COPY tuples (bigint id, vector) for coltype 'real[]' or 'vector'."""
    n, d = x.shape
    if coltype == "real[]":
        vec = [("len", ">i4"), ("ndim", ">i4"), ("hasnull", ">i4"), ("elem", ">i4"),
               ("dim", ">i4"), ("lbound", ">i4"), ("e", [("l", ">i4"), ("v", ">f4")], (d,))]
    else:
        vec = [("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (d,))]
    rec = np.zeros(n, dtype=[("nf", ">i2"), ("idlen", ">i4"), ("id", ">i8")] + vec)
    rec["nf"], rec["idlen"], rec["id"] = 2, 8, ids
    if coltype == "real[]":
        rec["len"] = 20 + 8 * d
        rec["ndim"], rec["elem"], rec["dim"], rec["lbound"] = 1, FLOAT4OID, d, 1
        rec["e"]["l"] = 4
        rec["e"]["v"] = x
    else:
        rec["len"], rec["dim"], rec["v"] = 4 + 4 * d, d, x
    return rec.tobytes()


def copy_vectors(conn, table, ids, x, coltype, chunk=50000):
    """COPY (id, embedding) rows into table; returns seconds."""
    x = np.asarray(x, dtype=np.float32)
    ids = np.asarray(ids, dtype=np.int64)
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(f"COPY {table} (id, embedding) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(PGCOPY_HEADER)
            for s in range(0, len(x), chunk):
                cp.write(_copy_rows(ids[s:s + chunk], x[s:s + chunk], coltype))
            cp.write(b"\xff\xff")
    return time.perf_counter() - t0


def literal(v, coltype):
    """Text literal of one vector ('{...}' for real[], '[...]' for vector)."""
    body = ",".join(repr(float(f)) for f in np.asarray(v, dtype=np.float32))
    return "{" + body + "}" if coltype == "real[]" else "[" + body + "]"


def relation_pages(conn, relname):
    return scalar(conn, "SELECT pg_relation_size(%s::regclass) / "
                        "current_setting('block_size')::int",
                  (relname,))


def device_stats(conn, index):
    """gpuindex_stats row of an index as a dict, or {} (peers, or no store loaded)."""
    try:
        cur = conn.execute("SELECT * FROM gpuindex_stats WHERE indexrelid = %s::regclass",
                           (index,))
        row = cur.fetchone()
        return dict(zip([c.name for c in cur.description], row)) if row else {}
    except psycopg.Error:
        return {}
