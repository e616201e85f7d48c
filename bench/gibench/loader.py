"""Puts a dataset into the cluster once: src_arr (real[]) and src_vec (vector) with the
base rows (id = row number), q_arr / q_vec with the queries (q from 1, for pgbench).
bench_meta remembers what is loaded, so a reused cluster is not loaded twice."""
import numpy as np

from . import db


def ensure_extensions(conn, engines, notes=None):
    """CREATE EXTENSION for each engine's extension; one that cannot be created (not
    installed in this server) is noted, and its engines are then skipped."""
    for ext in sorted({e.extension for e in engines}):
        try:
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
        except Exception as e:  # psycopg.Error: not installed, or failed to load
            msg = f"extension {ext} not available: {str(e).strip().splitlines()[0]}"
            print(f"bench: {msg}", flush=True)
            if notes is not None:
                notes.append(msg)


def load_dataset(conn, ds, coltypes, log=print):
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value text)")
    want = f"{ds.name}|{ds.metric}|{len(ds.base)}|{len(ds.queries)}"
    for coltype in sorted(coltypes):
        suffix = "arr" if coltype == "real[]" else "vec"
        have = db.scalar(conn, "SELECT value FROM bench_meta WHERE key = %s", (suffix,))
        if have == want:
            continue
        sqltype = "real[]" if coltype == "real[]" else f"vector({ds.dim})"
        for t in (f"src_{suffix}", f"q_{suffix}"):
            conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        conn.execute(f"CREATE TABLE src_{suffix} (id bigint PRIMARY KEY, embedding {sqltype}) "
                     f"WITH (autovacuum_enabled = off)")
        conn.execute(f"CREATE TABLE q_{suffix} (id bigint PRIMARY KEY, embedding {sqltype})")
        secs = db.copy_vectors(conn, f"src_{suffix}", np.arange(len(ds.base)), ds.base, coltype)
        db.copy_vectors(conn, f"q_{suffix}", np.arange(1, len(ds.queries) + 1), ds.queries,
                        coltype)
        conn.execute(f"ALTER TABLE q_{suffix} RENAME COLUMN id TO q")
        conn.execute(f"ALTER TABLE q_{suffix} RENAME COLUMN embedding TO v")
        conn.execute(f"VACUUM (ANALYZE, FREEZE) src_{suffix}")
        conn.execute(f"VACUUM ANALYZE q_{suffix}")
        conn.execute("INSERT INTO bench_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                     "SET value = EXCLUDED.value", (suffix, want))
        log(f"bench: loaded {len(ds.base)} rows into src_{suffix} in {secs:.1f} s (COPY)")
