"""Retrieval for RAG with gpuindex, offline: real English passages (the docstrings of the
Python modules on this machine), embedded with all-MiniLM-L6-v2 (minilm.py), stored in
PostgreSQL, indexed with gpuivf, and searched one question at a time and all at once
through the batch API.  Prints the passages found for a few questions, the timings, and
recall@10 against exact search (numpy over the same embeddings).

    python3 rag.py "host=/tmp/gpuindex-rag port=54391 user=postgres dbname=postgres" [N]
"""
import os
import sys
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "python"))
sys.path.insert(0, os.path.join(TOP, "bench"))

import gpuindex_psycopg as gp  # noqa: E402
from gibench.textembed import passages  # noqa: E402
from minilm import MiniLM  # noqa: E402

QUESTIONS = [
    "How do I read rows from a CSV file?",
    "How can I create a temporary directory that is deleted afterwards?",
    "How do I run a shell command and capture its output?",
    "Parse command line options and arguments",
    "How do I compress data with gzip?",
    "Make an HTTP request to a web server",
    "Serialize a Python object to JSON",
    "Compute a SHA-256 hash of some bytes",
]
K = 10
HELD_OUT = 500          # passages kept out of the table: questions for recall


def main():
    dsn = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    texts, root = passages()
    order = np.random.default_rng(7).permutation(len(texts))
    texts = [texts[i] for i in order]
    held, docs = texts[:HELD_OUT], texts[HELD_OUT:HELD_OUT + n]
    print(f"corpus: {len(docs)} passages (docstring paragraphs of the Python modules in "
          f"{root}), {len(held)} more kept out as recall questions")

    model = MiniLM()
    t0 = time.time()
    emb = model.encode(docs)
    qemb = model.encode(QUESTIONS + held)
    t_embed = time.time() - t0
    print(f"embedded {len(docs) + len(QUESTIONS) + len(held)} texts with all-MiniLM-L6-v2 "
          f"(numpy, CPU) in {t_embed:.1f} s")

    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS gpuindex")
    gp.register(conn)
    conn.execute("DROP TABLE IF EXISTS passages")
    conn.execute("CREATE TABLE passages (id bigint PRIMARY KEY, body text, embedding real[])")
    t0 = time.time()
    with conn.cursor().copy("COPY passages (id, body, embedding) FROM STDIN") as copy:
        for i, (body, row) in enumerate(zip(docs, emb)):
            copy.write_row((i, body, row))
    t_load = time.time() - t0
    lists = max(1, int(round(np.sqrt(len(docs)))))
    t0 = time.time()
    conn.execute(f"CREATE INDEX passages_embedding ON passages USING gpuivf "
                 f"(embedding real_ip_ops) WITH (lists = {lists})")
    t_build = time.time() - t0
    device = conn.execute("SELECT backend FROM gpuindex_service()").fetchone()[0]
    print(f"loaded in {t_load:.1f} s; gpuivf index ({lists} lists, backend {device}) built "
          f"in {t_build:.1f} s")
    conn.execute("SET gpuivf.probes = 8")

    print("\n== top 3 passages, one question a statement")
    lat = []
    for qi, question in enumerate(QUESTIONS):
        t0 = time.perf_counter()
        rows = conn.execute("SELECT id, body, embedding <#> %s FROM passages "
                            "ORDER BY embedding <#> %s LIMIT 3",
                            (qemb[qi], qemb[qi])).fetchall()
        lat.append(time.perf_counter() - t0)
        print(f"\nQ: {question}")
        for pid, body, dist in rows:
            print(f"  [{-dist:.3f}] {body[:150]}{'...' if len(body) > 150 else ''}")

    print("\n== all questions in one call (gpuivf_search_packed)")
    t0 = time.perf_counter()
    got = conn.execute("SELECT query, key FROM gpuivf_search_packed('passages_embedding', %s, "
                       "%s, 'id', NULL::bigint)", (gp.packed(qemb), K)).fetchall()
    t_batch = time.perf_counter() - t0
    found = [set() for _ in range(len(qemb))]
    for query, key in got:
        found[query - 1].add(key)
    exact = np.argsort(-(qemb @ emb.T), axis=1, kind="stable")[:, :K]
    recall = np.mean([len(found[i] & set(exact[i].tolist())) / K for i in range(len(qemb))])

    print(f"{len(qemb)} questions ({len(QUESTIONS)} above and {len(held)} held-out passages), "
          f"k {K}, probes 8: {t_batch * 1000:.1f} ms, {len(qemb) / t_batch:,.0f} questions/s")
    print(f"one question a statement: median {np.median(lat) * 1000:.2f} ms")
    print(f"recall@{K} against exact search over the same embeddings: {recall:.3f}")
    conn.close()


if __name__ == "__main__":
    main()
