"""IVF-PQ distances of gpuivf (quantizer = 'pq') against numpy.

The index's centroids, codebooks and codes are read through gpuivf_centroids,
gpuivf_pq_codebooks and gpuivf_pq_codes; numpy recomputes from them, with its
own code, the asymmetric distance of each query to every row (the formulas of
src/backend/gi_kind_ivfpq.h) and the batch API's answers (every list probed,
no re-ranking) must match: the same distances for the rows it returns, within
float tolerance, and those rows the nearest by numpy's distances.  Also checks
that the codes are the nearest entries of each row's residual, and prints the
recall against exact search.  Prints "ok"/"FAILED" lines; exits non-zero on a
failure.

With a second argument FILE it also leaves an index pq_keep (4-bit codes) with a row
inserted after its build and writes its answers to FILE; run again with
"--after-restart FILE" (after the server restarted) it checks that the index
answers the same, reloaded from its pages (codebooks included).
"""

import json
import sys
import time

import numpy as np
import psycopg

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"FAILED - {what}")


def vec(a):
    return "{" + ",".join(repr(float(x)) for x in a) + "}"


def pq_distances(metric, q, centroids, books, lists, codes):
    """numpy's asymmetric distance of query q to every row (lists[i], codes[i])."""
    m, ksub, dsub = books.shape
    q = q.astype(np.float64)
    c = centroids.astype(np.float64)[lists]                # rows x dim
    e = books.astype(np.float64)[np.arange(m)[None, :], codes]   # rows x m x dsub
    approx = c + e.reshape(len(lists), m * dsub)
    if metric == "l2":
        return ((q[None, :] - approx) ** 2).sum(1)
    ip = approx @ q
    if metric == "ip":
        return -ip
    return 1.0 - ip / np.linalg.norm(q)


def exact_distances(metric, q, data):
    q = q.astype(np.float64)
    x = data.astype(np.float64)
    if metric == "l2":
        return ((x - q) ** 2).sum(1)
    if metric == "ip":
        return -(x @ q)
    return 1.0 - (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))


def value(metric, d):
    """what the batch API reports for a ranked distance"""
    if metric == "l2":
        return np.sqrt(d)
    if metric == "cosine":
        return np.clip(d, 0.0, 2.0)
    return d


def run_metric(conn, metric, opclass, options, data, queries):
    name = f"pq_{metric}"
    conn.execute(f"CREATE INDEX {name} ON pq_items USING gpuivf (v {opclass}) WITH ({options})")
    nlists = conn.execute("SELECT lists FROM gpuivf_index_info(%s)", (name,)).fetchone()[0]
    conn.execute(f"SET gpuivf.probes = {nlists}")
    centroids = np.array([r[1] for r in conn.execute(
        "SELECT list, centroid FROM gpuivf_centroids(%s) ORDER BY list", (name,))], dtype=np.float32)
    cb = conn.execute("SELECT subspace, entry, centroid FROM gpuivf_pq_codebooks(%s) "
                      "ORDER BY subspace, entry", (name,)).fetchall()
    m = max(r[0] for r in cb) + 1
    ksub = max(r[1] for r in cb) + 1
    books = np.array([r[2] for r in cb], dtype=np.float32).reshape(m, ksub, -1)
    rows = conn.execute(f"SELECT p.list, i.id, p.code FROM gpuivf_pq_codes('{name}') p "
                        "JOIN pq_items i ON i.ctid = p.ctid ORDER BY i.id").fetchall()
    ids = np.array([r[1] for r in rows])
    lists = np.array([r[0] for r in rows])
    codes = np.array([r[2] for r in rows])
    check(len(rows) == len(data) and np.array_equal(ids, np.arange(1, len(data) + 1)),
          f"{metric}: one code per row")

    # the codes are the nearest entries to each row's residual
    x = data.astype(np.float64)
    if metric == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    res = (x - centroids.astype(np.float64)[lists]).reshape(len(data), m, -1)
    d2 = ((res[:, :, None, :] - books.astype(np.float64)[None]) ** 2).sum(-1)
    best = d2.min(-1)
    mine = np.take_along_axis(d2, codes[:, :, None], -1)[..., 0]
    check(np.allclose(mine, best, rtol=1e-5, atol=1e-6),
          f"{metric}: every code is the nearest codebook entry of its residual")

    got = conn.execute(f"SELECT query, i.id, distance FROM gpuivf_search('{name}', %s::real[], 10) s "
                       "JOIN pq_items i ON i.ctid = s.ctid ORDER BY query, distance, i.id",
                       (queries.tolist(),)).fetchall()
    dist_ok = order_ok = True
    recall = 0.0
    worst = 0.0
    for qi, q in enumerate(queries):
        mine = [(r[1], r[2]) for r in got if r[0] == qi + 1]
        ref = pq_distances(metric, q, centroids, books, lists, codes)
        refv = value(metric, ref)
        for key, d in mine:
            err = abs(refv[key - 1] - d)
            worst = max(worst, err / max(1.0, abs(d)))
            if err > 1e-4 * max(1.0, abs(d)):
                dist_ok = False
        # nothing numpy ranks clearly nearer than the 10th returned was left out
        if len(mine) != 10 or np.sort(refv)[9] < max(d for _, d in mine) - 1e-4 * max(1.0, abs(mine[-1][1])):
            order_ok = False
        ex = np.argsort(exact_distances(metric, q, data), kind="stable")[:10] + 1
        recall += len(set(ex) & {k for k, _ in mine}) / 10
    check(dist_ok, f"{metric}: the index's distances are numpy's from the codebooks and codes "
                   f"(worst relative difference {worst:.2e})")
    check(order_ok, f"{metric}: the rows returned are numpy's 10 nearest by code distance")
    print(f"# {metric}: recall@10 of code distances against exact search: "
          f"{recall / len(queries):.3f}")
    conn.execute(f"DROP INDEX {name}")


def keep_answers(conn, queries):
    return conn.execute("SELECT query, i.id, distance FROM gpuivf_search('pq_keep', %s::real[], 10) s "
                        "JOIN pq_items i ON i.ctid = s.ctid ORDER BY query, distance, i.id",
                        (queries.tolist(),)).fetchall()


def after_restart(dsn, path):
    with open(path) as f:
        saved = json.load(f)
    queries = np.array(saved["queries"], dtype=np.float32)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET gpuivf.probes = 12")
        got = [list(r) for r in keep_answers(conn, queries)]
        check(got == saved["answers"], "after a server restart the pq index answers as before")
        check(any(r[1] == 99999 for r in got if r[0] == 1),
              "the row inserted after the build is still found")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def keep_index(conn, queries, path):
    conn.execute("CREATE INDEX pq_keep ON pq_items USING gpuivf (v real_l2_ops) "
                 "WITH (lists = 12, quantizer = 'pq', pq_bits = 4)")
    conn.execute("INSERT INTO pq_items VALUES (99999, %s)", (vec(queries[0] + 0.01),))
    conn.execute("SET gpuivf.probes = 12")
    before = keep_answers(conn, queries)
    check(any(r[1] == 99999 for r in before if r[0] == 1), "a row inserted after the build is found")
    conn.execute("SELECT pg_terminate_backend(pid) FROM gpuindex_service()")
    for _ in range(100):
        try:
            after = keep_answers(conn, queries)
            break
        except psycopg.Error:
            time.sleep(0.2)
    check(after == before, "after a device service restart the pq index reloads and answers as before")
    with open(path, "w") as f:
        json.dump({"queries": queries.tolist(), "answers": [list(r) for r in before]}, f)


def main(dsn, keep=None):
    rng = np.random.default_rng(11)
    n, dim = 3000, 16
    centres = rng.uniform(0, 10, size=(30, dim))
    data = (centres[rng.integers(0, 30, n)] + rng.uniform(-1.5, 1.5, size=(n, dim))).astype(np.float32)
    queries = (centres[rng.integers(0, 30, 8)] + rng.uniform(-1.5, 1.5, size=(8, dim))).astype(np.float32)

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS gpuindex")
        conn.execute("CREATE TABLE pq_items (id int PRIMARY KEY, v real[])")
        with conn.cursor() as cur:
            with cur.copy("COPY pq_items (id, v) FROM STDIN") as copy:
                for i, row in enumerate(data, 1):
                    copy.write_row((i, vec(row)))
        run_metric(conn, "l2", "real_l2_ops", "lists = 12, quantizer = 'pq'", data, queries)
        run_metric(conn, "ip", "real_ip_ops", "lists = 12, quantizer = 'pq', pq_m = 4, pq_bits = 6",
                   data, queries)
        run_metric(conn, "cosine", "real_cosine_ops", "lists = 12, quantizer = 'pq', pq_m = 16",
                   data, queries)
        # 4-bit codes, two a byte: eight of them fill a word, sixteen two
        run_metric(conn, "l2", "real_l2_ops", "lists = 12, quantizer = 'pq', pq_bits = 4",
                   data, queries)
        run_metric(conn, "ip", "real_ip_ops", "lists = 12, quantizer = 'pq', pq_m = 16, pq_bits = 4",
                   data, queries)
        if keep:
            keep_index(conn, queries, keep)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--after-restart":
        sys.exit(after_restart(sys.argv[1], sys.argv[3]))
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
