"""The psycopg 3 adapters of python/gpuindex_psycopg.py against a live cluster.

Every answer is checked against numpy brute force over the same seeded data, not
against gpuindex: vectors and batches passed as numpy arrays without casts, sparse
vectors both ways, and the errors a wrong shape gives.  Prints TAP-like lines and
"N passed, N failed"; exits non-zero on a failure.
"""

import os
import sys

import numpy as np
import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import gpuindex_psycopg as gp  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"FAILED - {what}")


def main(dsn):
    rng = np.random.default_rng(7)
    n, dim = 2000, 16
    data = rng.normal(size=(n, dim)).astype(np.float32)
    queries = rng.normal(size=(20, dim)).astype(np.float32)
    exact = np.argsort(((queries[:, None, :].astype(np.float64) - data[None]) ** 2).sum(-1),
                       axis=1, kind="stable")[:, :10] + 1

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS gpuindex")
        gp.register(conn)
        conn.execute("CREATE TABLE py_items (id int PRIMARY KEY, v real[])")
        with conn.cursor() as cur:
            with cur.copy("COPY py_items (id, v) FROM STDIN") as copy:
                for i, row in enumerate(data, 1):
                    copy.write_row((i, row))
        check(conn.execute("SELECT count(*) FROM py_items").fetchone()[0] == n,
              "COPY takes numpy rows as real[]")
        conn.execute("CREATE INDEX ON py_items USING gpuivf (v) WITH (lists = 8)")
        conn.execute("SET gpuivf.probes = 8")
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM py_items ORDER BY v <-> %s LIMIT 10", (queries[0],)))
        check("Index Scan using py_items_v_idx" in plan, "a numpy query uses the gpuivf index")

        got = [[r[0] for r in conn.execute(
            "SELECT id FROM py_items ORDER BY v <-> %s LIMIT 10", (q,))] for q in queries]
        check(np.array_equal(np.array(got), exact),
              "ORDER BY v <-> %s with a numpy vector: the exact top 10 of numpy")
        got = [r[0] for r in conn.execute(
            "SELECT id FROM py_items ORDER BY v <-> %s LIMIT 10", (gp.Vector(queries[0].tolist()),))]
        check(got == exact[0].tolist(), "a Python list wrapped in Vector")

        rows = conn.execute(
            "SELECT query, key FROM gpuivf_search('py_items_v_idx', %s, 10, 'id', NULL::int)",
            (queries,)).fetchall()
        batch = np.zeros((len(queries), 10), dtype=int)
        for (q, key), pos in zip(rows, [i % 10 for i in range(len(rows))]):
            batch[q - 1, pos] = key
        check(len(rows) == 200 and np.array_equal(batch, exact),
              "gpuivf_search with a 2-D numpy batch: numpy's top 10 for each query")
        rows = conn.execute(
            "SELECT query, key FROM gpuivf_search_packed('py_items_v_idx', %s, 10, 'id', NULL::int)",
            (gp.packed(queries),)).fetchall()
        check([k for _, k in rows] == exact.ravel().tolist(), "gpuivf_search_packed with packed()")

        try:
            conn.execute("SELECT id FROM py_items ORDER BY v <-> %s LIMIT 1",
                         (np.zeros((2, 2, 2), dtype=np.float32),))
            check(False, "a 3-D array is refused")
        except ValueError as e:
            check("1 dimension" in str(e), "a 3-D array is refused before it is sent")
        try:
            conn.execute("SELECT id FROM py_items ORDER BY v <-> %s LIMIT 1",
                         (np.full(dim, np.nan, dtype=np.float32),))
            check(False, "NaN is refused")
        except psycopg.errors.DataException as e:
            check("NaN" in str(e), "NaN in a query: the server's clear error")

        # sparse vectors: 500 documents of 3-12 terms of 300, inner products by numpy
        sdim = 300
        docs = []
        for _ in range(500):
            terms = rng.choice(sdim, size=rng.integers(3, 13), replace=False)
            docs.append(gp.SparseVector(terms, rng.uniform(0.1, 3.0, terms.size).round(3), sdim))
        conn.execute("CREATE TABLE py_sparse (id int PRIMARY KEY, v spvec)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO py_sparse VALUES (%s, %s)",
                            [(i, d) for i, d in enumerate(docs, 1)])
        back = [r[0] for r in conn.execute("SELECT v FROM py_sparse ORDER BY id")]
        check(back == docs,
              "spvec values come back as the SparseVector that went in")
        conn.execute("CREATE INDEX ON py_sparse USING gpusparse (v)")
        conn.execute("SET enable_seqscan = off")
        dense = np.stack([d.to_dense() for d in docs]).astype(np.float64)
        sq = [gp.SparseVector.from_dense(np.where(rng.random(sdim) < 0.05, rng.uniform(0.5, 2, sdim), 0))
              for _ in range(10)]
        plan = " ".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM py_sparse ORDER BY v <#> %s LIMIT 5", (docs[0],)))
        check("Index Scan using py_sparse_v_idx" in plan, "a SparseVector query uses the gpusparse index")
        want = []
        for q in sq:
            score = dense @ q.to_dense().astype(np.float64)
            order = sorted(range(len(docs)), key=lambda i: (-np.float32(score[i]), i))
            want.append([i + 1 for i in order[:5] if score[i] != 0])
        got = [[r[0] for r in conn.execute(
            "SELECT id FROM py_sparse WHERE v <#> %s < 0 ORDER BY v <#> %s LIMIT 5", (q, q))]
            for q in sq]
        check(got == want, "ORDER BY v <#> %s with a SparseVector: numpy's best 5")
        rows = conn.execute(
            "SELECT query, key FROM gpusparse_search('py_sparse_v_idx', %s, 5, 'id', NULL::int)",
            (sq,)).fetchall()
        byq = [[k for qq, k in rows if qq == i + 1] for i in range(len(sq))]
        check(byq == want, "gpusparse_search with a list of SparseVector")
        try:
            gp.SparseVector([1, 1], [1.0, 2.0], 5)
            check(False, "duplicate indices are refused")
        except ValueError:
            check(True, "duplicate indices are refused")

        conn.execute("DROP TABLE py_items, py_sparse")
    print(f"python psycopg: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
