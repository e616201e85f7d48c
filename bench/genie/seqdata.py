"""Strings for the sequence scenario: Debian package names and description lines, queries
made from sampled strings by seeded random character edits, and the exact top-k edit
distances (rapidfuzz's Levenshtein, unit costs over characters: the costs of
fuzzystrmatch's levenshtein() and of genie_levenshtein).

The text comes from the Translation-en files that bench/sparse/corpus_debian.py fetches
(bookworm: package name, synopsis, long description), read with its own reader: the
package names, the synopses and every non-empty line of the long descriptions, stripped,
of MIN_LEN to MAX_LEN characters, without control characters or backslashes, distinct.
A seeded sample of --rows of them is the table.

Cached under bench/.cache/data/genie-seq-debian-N/: strings.txt (one a line, row id =
line number), queries.txt (source row, edits, query), gt.npz (per query the K smallest
distances and rows of one such answer, ties by row), stats.json. A GPU host without
network or rapidfuzz uses the folder carried from here.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "sparse"))
from gibench.paths import DATA_CACHE  # noqa: E402

K = 10
MIN_LEN, MAX_LEN = 4, 120
SEED = 20261124
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 -."
EDIT_RATES = (0.10, 0.40)


def name_of(rows):
    return f"debian-{rows // 1000}k" if rows % 1000 == 0 else f"debian-{rows}"


def _clean(s):
    s = s.strip()
    if not MIN_LEN <= len(s) <= MAX_LEN or "\\" in s:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in s):
        return None
    return s


def corpus(log=print):
    """Sorted distinct strings of the Debian text, and their counts by source."""
    import corpus_debian
    entries = corpus_debian.parse_translations(corpus_debian.fetch_translations(log))
    names, syns, lines = set(), set(), set()
    for _comp, pkg, syn, body in entries:
        for s, into in ((pkg, names), (syn, syns)):
            s = _clean(s)
            if s:
                into.add(s)
        for line in body.split("\n"):
            s = _clean(line)
            if s:
                lines.add(s)
    allset = names | syns | lines
    counts = {"packages": len(entries), "names": len(names), "synopses": len(syns),
              "description_lines": len(lines), "distinct": len(allset)}
    return sorted(allset), counts, names


def mutate(s, rng):
    """s with round(rate * len) random edits (at least one), rate uniform in EDIT_RATES:
    each a substitution, insertion or deletion at a random place, characters from
    ALPHABET."""
    rate = rng.uniform(*EDIT_RATES)
    edits = max(1, int(round(rate * len(s))))
    c = list(s)
    for _ in range(edits):
        op = rng.integers(3) if len(c) > 1 else 1
        ch = ALPHABET[rng.integers(len(ALPHABET))]
        if op == 0:
            c[rng.integers(len(c))] = ch
        elif op == 1:
            c.insert(int(rng.integers(len(c) + 1)), ch)
        else:
            del c[rng.integers(len(c))]
    return "".join(c), edits


def exact_topk(strings, queries, k=K, chunk=32, log=print):
    """(nq, k) smallest edit distances and the rows of one such answer (ties by row),
    all cores through rapidfuzz.process.cdist."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein
    nq = len(queries)
    dist = np.zeros((nq, k), dtype=np.int32)
    ids = np.zeros((nq, k), dtype=np.int64)
    t0 = time.time()
    for s in range(0, nq, chunk):
        m = process.cdist(queries[s:s + chunk], strings, scorer=Levenshtein.distance,
                          dtype=np.int32, workers=-1)
        part = np.argpartition(m, k - 1, axis=1)[:, :k]
        for i in range(m.shape[0]):
            # every row at the k-th distance or nearer, then ties by row number
            kth = m[i, part[i]].max()
            cand = np.flatnonzero(m[i] <= kth)
            o = np.lexsort((cand, m[i, cand]))[:k]
            ids[s + i] = cand[o]
            dist[s + i] = m[i, cand[o]]
    log(f"genie-seq: exact top-{k} edit distances of {nq} queries over {len(strings)} "
        f"strings in {time.time() - t0:.1f} s (rapidfuzz cdist, all cores)")
    return dist, ids


class SeqSet:
    """The table's strings, the queries (with their source rows and edit counts), the
    exact top-K distances."""

    def __init__(self, name, directory, strings, queries, src, edits, gt_dist, gt_ids, stats):
        self.name, self.dir, self.strings, self.queries = name, Path(directory), strings, queries
        self.src, self.edits, self.gt_dist, self.gt_ids, self.stats = src, edits, gt_dist, gt_ids, stats


def ensure(rows, nq, log=print):
    """The cached set of `rows` strings with at least `nq` queries (built when missing)."""
    name = name_of(rows)
    d = DATA_CACHE / f"genie-seq-{name}"
    if (d / "stats.json").exists():
        st = json.loads((d / "stats.json").read_text())
        if st.get("queries", 0) >= nq:
            return d
    t0 = time.time()
    allstr, counts, names = corpus(log)
    if rows > len(allstr):
        raise SystemExit(f"genie-seq: --rows {rows} > {len(allstr)} distinct strings")
    rng = np.random.default_rng(SEED)
    pick = np.sort(rng.choice(len(allstr), size=rows, replace=False))
    strings = [allstr[i] for i in pick]
    qsrc = rng.choice(rows, size=nq, replace=False)
    queries, edits = [], []
    for i in qsrc:
        q, e = mutate(strings[i], rng)
        queries.append(q)
        edits.append(e)
    gt_dist, gt_ids = exact_topk(strings, queries, log=log)
    d.mkdir(parents=True, exist_ok=True)
    (d / "strings.txt").write_text("".join(s + "\n" for s in strings))
    with open(d / "queries.txt", "w") as f:
        for i, e, q in zip(qsrc, edits, queries):
            f.write(f"{i}\t{e}\t{q}\n")
    np.savez(d / "gt.npz", dist=gt_dist, ids=gt_ids)
    lens = np.array([len(s) for s in strings])
    qlens = np.array([len(s) for s in queries])
    stats = dict(counts, name=name, rows=rows, queries=nq, seed=SEED,
                 rows_package_names=int(sum(1 for s in strings if s in names)),
                 length_mean=round(float(lens.mean()), 1), length_p50=int(np.median(lens)),
                 length_max=int(lens.max()), query_length_mean=round(float(qlens.mean()), 1),
                 edit_rates=list(EDIT_RATES), edits_mean=round(float(np.mean(edits)), 2),
                 gt_kth_distance_mean=round(float(gt_dist[:, -1].mean()), 2),
                 gt_first_distance_mean=round(float(gt_dist[:, 0].mean()), 2),
                 gt="rapidfuzz.process.cdist, Levenshtein.distance (unit costs)",
                 built_seconds=round(time.time() - t0, 1),
                 built=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    (d / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    log(f"genie-seq: {name} written to {d}: {json.dumps(stats)}")
    return d


def load(rows, nq, log=print):
    d = ensure(rows, nq, log)
    strings = (d / "strings.txt").read_text().split("\n")[:-1]
    src, edits, queries = [], [], []
    for line in (d / "queries.txt").read_text().split("\n")[:nq]:
        a, b, q = line.split("\t", 2)
        src.append(int(a))
        edits.append(int(b))
        queries.append(q)
    gt = np.load(d / "gt.npz")
    stats = json.loads((d / "stats.json").read_text())
    return SeqSet(name_of(rows), d, strings, queries, np.array(src), np.array(edits),
                  gt["dist"][:nq], gt["ids"][:nq], stats)


def distance(a, b):
    """Edit distance with unit costs over characters (rapidfuzz, or a plain DP without it)."""
    try:
        from rapidfuzz.distance import Levenshtein
    except ImportError:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]
    return Levenshtein.distance(a, b)
