"""The real BM25 collection `bm25-debian`, built offline from English text on a Debian 12
machine:

* the long descriptions of every package of bookworm (main, contrib, non-free,
  non-free-firmware), from the archive's i18n Translation-en files, fetched by apt-get
  with a private configuration, sources list and state under bench/.cache/ (the system's
  apt setup is neither read nor touched);
* the English manual pages installed under /usr/share/man/man[1-9] (locale folders left
  out), roff markup stripped by the small parser below (no groff run: a few seconds for
  all pages on 2 cores).

Texts are cut into passages of at most 250 words (a text of W > 250 words into
ceil(W / 250) equal parts, so 125-250 words each), so that no document has 1,000 distinct
terms (pgvector's sparsevec HNSW limit). Tokens: lower-case [a-z0-9]+, a small English
stop-word list dropped, no stemming. Terms seen in one document only are dropped; the
dimension is the vocabulary size, terms numbered by descending document frequency.

Document vector: BM25 weights, k1 = 0.9, b = 0.4,
    w(t, d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
    idf(t)  = ln(1 + (N - df + 0.5) / (df + 0.5)),
dl = the document's tokens after stop-word removal. Query vector: the query's term counts,
so that the inner product is the BM25 score. Queries: the one-line synopses (short
descriptions) of packages drawn with a fixed seed, distinct synopses only, each with at
least one term of the vocabulary; synopses are not part of any document.

Cached under bench/.cache/data/bm25-debian/: docs.npz (scipy CSR, float32), queries.npz,
stats.json, docs.tsv (id, source, name, part) and queries.txt (the query texts).

    python3 bench/sparse/corpus_debian.py [--nq 1000] [--force]
"""
import argparse
import gzip
import hashlib
import json
import lzma
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gibench.paths import CACHE, DATA_CACHE  # noqa: E402

NAME = "bm25-debian"
K1, B = 0.9, 0.4
MAX_WORDS = 250
MIN_TOKENS = 5          # documents with fewer tokens (after stop words) are dropped
SEED = 20261123
SUITE = "bookworm"
COMPONENTS = ("main", "contrib", "non-free", "non-free-firmware")
MIRROR = os.environ.get("BENCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")
KEYRING = os.environ.get("BENCH_DEBIAN_KEYRING", "/usr/share/keyrings/debian-archive-keyring.gpg")
MAN_ROOT = Path(os.environ.get("BENCH_MAN_ROOT", "/usr/share/man"))

# A small English stop-word list (articles, pronouns, auxiliaries, prepositions,
# conjunctions); written here, no stemming.
STOP = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our
ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself
yourselves also may must shall might etc via
""".split())
TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text):
    return [t for t in TOKEN.findall(text.lower()) if t not in STOP and len(t) <= 40]


# --------------------------------------------------------------------------- Debian

def fetch_translations(log=print):
    """apt-get update with a private configuration (APT_CONFIG: read before, and instead
    of, the system's apt.conf.d), sources list and state; returns the Translation-en files."""
    apt = CACHE / f"apt-{SUITE}-i18n"
    lists = apt / "lists"
    have = sorted(lists.glob("*_i18n_Translation-en*"))
    if len(have) >= len(COMPONENTS):
        return have
    for d in (lists / "partial", apt / "cache" / "archives" / "partial", apt / "parts"):
        d.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(
        f"deb [signed-by={KEYRING}] {MIRROR} {SUITE} {' '.join(COMPONENTS)}\n")
    (apt / "apt.conf").write_text("\n".join([
        f'Dir::Etc::Parts "{apt / "parts"}";',
        'Dir::Etc::main "/dev/null";',
        f'Dir::Etc::SourceList "{apt / "sources.list"}";',
        'Dir::Etc::SourceParts "/dev/null";',
        f'Dir::State "{apt}";',
        f'Dir::State::Lists "{lists}";',
        'Dir::State::status "/dev/null";',
        f'Dir::Cache "{apt / "cache"}";',
        'APT::Sandbox::User "root";',
        'Acquire::Languages { "en"; };',
        # only the translations: no Packages, Contents or DEP-11 indices
        'Acquire::IndexTargets::deb::Packages::DefaultEnabled "false";',
        'Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";',
        'Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";',
        'Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";',
        'Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled "false";', ""]))
    log(f"corpus: fetching {SUITE}'s Translation-en ({', '.join(COMPONENTS)}) with a private apt state")
    subprocess.run(["apt-get", "-qq", "update"], check=True,
                   env=dict(os.environ, APT_CONFIG=str(apt / "apt.conf")))
    have = sorted(lists.glob("*_i18n_Translation-en*"))
    if not have:
        raise SystemExit("corpus: apt-get update fetched no Translation-en file")
    return have


def _open_any(path):
    p = str(path)
    if p.endswith(".gz"):
        return gzip.open(p, "rt", encoding="utf-8", errors="replace")
    if p.endswith(".xz"):
        return lzma.open(p, "rt", encoding="utf-8", errors="replace")
    if p.endswith(".lz4") or p.endswith(".zst"):
        cmd = ["lz4cat", p] if p.endswith(".lz4") else ["zstdcat", p]
        return iter(subprocess.run(cmd, check=True, capture_output=True).stdout
                    .decode("utf-8", "replace").splitlines(True))
    return open(p, encoding="utf-8", errors="replace")


def parse_translations(files):
    """[(component, package, synopsis, body)] from Translation-en files (deb822)."""
    out = []
    for f in files:
        comp = re.search(r"_dists_[^_]+_(.+)_i18n_", Path(f).name)
        comp = comp.group(1) if comp else "?"
        pkg, syn, body = None, None, []

        def flush():
            if pkg is not None and syn is not None:
                out.append((comp, pkg, syn, "\n".join(body)))

        for line in _open_any(f):
            line = line.rstrip("\n")
            if not line.strip():
                flush()
                pkg, syn, body = None, None, []
            elif line.startswith("Package:"):
                pkg = line.split(":", 1)[1].strip()
            elif line.startswith("Description-en:"):
                syn = line.split(":", 1)[1].strip()
            elif line.startswith(" ") and syn is not None:
                body.append("" if line.strip() == "." else line[1:])
        flush()
    return out


# --------------------------------------------------------------------------- man pages

# escapes that produce no text (font, size, strings, registers, motions, ...)
_ESC_DROP = re.compile(r"""\\(?:
      [fF](?:\[[^\]]*\]|\(..|.)
    | s(?:[+-]?\d\d?|[+-]?\(\d\d|\[[^\]]*\])
    | \*(?:\[[^\]]*\]|\(..|.)
    | n[+-]?(?:\[[^\]]*\]|\(..|.)
    | [hvwoXlLbDHSRxNZAB]'[^']*'
    | k(?:\[[^\]]*\]|\(..|.)
    | [&|^%:)dupatrzc{}!/,]
    )""", re.X)
# escapes that stand for a character or a space: a space (tokens split there)
_ESC_SPACE = re.compile(r"\\(?:\(..|\[[^\]]*\]|.)")
_CTRL = re.compile(r"^[.'][ \t]*([^ \t]*)[ \t]*(.*)$")
_MDOC_WORD = re.compile(r"^[A-Z][a-z][a-z]?$")
# macros whose arguments are text (man and mdoc); other request lines are dropped
_TEXT_MACROS = frozenset("""SH SS B I BI BR IB IR RB RI SB SM IP OP Nm Nd Fl Ar Op Oo Oc
Xr Sh Ss Pa Cm Dv Er Ev Fa Fn Fo Ft Ic Li Va Vt Em Sy Dq Qq Sq Pq Ql It Tn Ms Ad An Ux Bx
Nx Fx Ox Bsx At St Aq Bq Brq Ho Eo Xo Xc Lk Mt Cd In""".split())
_BLOCKS = frozenset(["de", "de1", "am", "ig", "dei", "ami"])


def _split_args(s):
    args, cur, q = [], [], False
    for ch in s:
        if ch == '"':
            q = not q
        elif ch in " \t" and not q:
            if cur:
                args.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        args.append("".join(cur))
    return args


def _unescape(s):
    s = s.replace("\\\\", "\\e").replace("\\-", "-").replace("\\e", "\\ ")
    return _ESC_SPACE.sub(" ", _ESC_DROP.sub("", s))


def roff_to_text(raw):
    """Plain text of a man page (man or mdoc macros); '' for a .so redirection."""
    out, block, tbl_format = [], None, False
    for line in raw.splitlines():
        if block is not None:
            if line.startswith(".."):
                block = None
            continue
        if tbl_format:      # tbl options / format lines after .TS, up to one ending in '.'
            if line.rstrip().endswith("."):
                tbl_format = False
            continue
        if line[:1] in (".", "'"):
            m = _CTRL.match(line)
            name, rest = (m.group(1), m.group(2)) if m else ("", "")
            if name.startswith('\\"') or name == "":
                continue
            if name == "so":
                if not out:
                    return ""        # a redirection stub
                continue
            if name in _BLOCKS:
                block = name
                continue
            if name == "TS":
                tbl_format = True
                continue
            if name in _TEXT_MACROS:
                args = _split_args(rest)
                if name[0].isupper() and len(name) == 2 and name[1].islower():
                    args = [a for a in args if not _MDOC_WORD.match(a)]
                out.append(_unescape(" ".join(args)))
            continue
        if '\\"' in line:
            line = line.split('\\"', 1)[0]
        out.append(_unescape(line))
    return "\n".join(out)


def _man_one(path):
    try:
        with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except (OSError, EOFError):
        return path, None
    return path, roff_to_text(raw)


def man_files():
    files = []
    for d in sorted(MAN_ROOT.glob("man[1-9]*")):
        if d.is_dir():
            files += sorted(str(p) for p in d.iterdir() if p.is_file() and not p.is_symlink())
    return files


def chunks(words, limit=MAX_WORDS):
    if len(words) <= limit:
        return [words]
    n = math.ceil(len(words) / limit)
    size = math.ceil(len(words) / n)
    return [words[i:i + size] for i in range(0, len(words), size)]


# --------------------------------------------------------------------------- build

def build(out_dir, nq=1000, log=print):
    t0 = time.time()
    tr_files = fetch_translations(log)
    entries = parse_translations(tr_files)
    log(f"corpus: {len(entries)} package descriptions in {len(tr_files)} Translation-en files")
    docs_text, meta = [], []       # (text) and (source, name, part)
    seen = set()
    n_bodies = 0
    for comp, pkg, syn, body in entries:
        h = hashlib.sha1(body.encode()).digest()
        if not body.strip() or h in seen:
            continue
        seen.add(h)
        n_bodies += 1
        for i, ch in enumerate(chunks(body.split())):
            docs_text.append(" ".join(ch))
            meta.append(("debian-" + comp, pkg, i))
    n_deb = len(docs_text)

    files = man_files()
    n_pages, n_stub, n_dup = 0, 0, 0
    with Pool(max(1, min(os.cpu_count() or 1, 8))) as pool:
        for path, text in pool.imap(_man_one, files, chunksize=64):
            if not text or not text.strip():
                n_stub += 1
                continue
            h = hashlib.sha1(text.encode()).digest()
            if h in seen:
                n_dup += 1
                continue
            seen.add(h)
            n_pages += 1
            name = os.path.basename(path).removesuffix(".gz")
            for i, ch in enumerate(chunks(text.split())):
                docs_text.append(" ".join(ch))
                meta.append(("man", name, i))
    log(f"corpus: {n_pages} man pages ({n_stub} redirections or empty, {n_dup} duplicates "
        f"skipped) -> {len(docs_text) - n_deb} passages; {n_deb} Debian passages from "
        f"{n_bodies} distinct descriptions ({time.time() - t0:.0f} s)")

    # tokens, term frequencies
    vocab, rows, cols, tfs, dls, keep = {}, [], [], [], [], []
    for i, text in enumerate(docs_text):
        toks = tokens(text)
        if len(toks) < MIN_TOKENS:
            continue
        c = Counter(toks)
        r = len(keep)
        keep.append(i)
        dls.append(len(toks))
        for t, n in c.items():
            tid = vocab.setdefault(t, len(vocab))
            cols.append(tid)
            tfs.append(n)
        rows.append(len(c))
    indptr = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(rows, out=indptr[1:])
    cols = np.asarray(cols, dtype=np.int64)
    tfs = np.asarray(tfs, dtype=np.float64)
    df = np.bincount(cols, minlength=len(vocab))
    # drop df = 1; number the kept terms by descending df (then alphabetically)
    terms = np.array(list(vocab), dtype=object)
    kept = np.flatnonzero(df >= 2)
    order = kept[np.lexsort((terms[kept].astype(str), -df[kept]))]
    newid = np.full(len(vocab), -1, dtype=np.int64)
    newid[order] = np.arange(len(order))
    dim = len(order)
    n = len(keep)
    dl = np.asarray(dls, dtype=np.float64)
    avgdl = dl.mean()
    rowid = np.repeat(np.arange(n), np.diff(indptr))
    m = newid[cols] >= 0
    r, c, tf = rowid[m], newid[cols][m], tfs[m]
    dfk = df[order].astype(np.float64)
    idf = np.log1p((n - dfk + 0.5) / (dfk + 0.5))
    w = idf[c] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl[r] / avgdl))
    docs = sp.csr_matrix((w.astype(np.float32), (r, c)), shape=(n, dim))
    docs.sort_indices()
    empty = np.flatnonzero(np.diff(docs.indptr) == 0)
    if len(empty):      # documents whose terms all had df = 1
        good = np.flatnonzero(np.diff(docs.indptr) > 0)
        docs = docs[good]
        keep = [keep[g] for g in good]
        n = docs.shape[0]
    log(f"corpus: {n} documents, vocabulary {dim} (of {len(vocab)} terms, df >= 2), "
        f"{docs.nnz} postings ({time.time() - t0:.0f} s)")

    # queries: synopses of packages drawn with a fixed seed
    term_id = {t: int(newid[vocab[t]]) for t in vocab if newid[vocab[t]] >= 0}
    rng = np.random.default_rng(SEED)
    qtext, qrows, qseen = [], [], set()
    for j in rng.permutation(len(entries)):
        syn = entries[j][2]
        key = syn.lower()
        if key in qseen:
            continue
        qseen.add(key)
        c = Counter(t for t in tokens(syn) if t in term_id)
        if not c:
            continue
        qtext.append((entries[j][1], syn))
        qrows.append(sorted((term_id[t], float(v)) for t, v in c.items()))
        if len(qrows) == nq:
            break
    qptr = np.cumsum([0] + [len(q) for q in qrows])
    queries = sp.csr_matrix((np.array([v for q in qrows for _, v in q], dtype=np.float32),
                             np.array([t for q in qrows for t, _ in q], dtype=np.int32),
                             qptr), shape=(len(qrows), dim))

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sp.save_npz(out_dir / "docs.npz", docs, compressed=False)
    sp.save_npz(out_dir / "queries.npz", queries, compressed=False)
    with open(out_dir / "docs.tsv", "w") as f:
        for i, k in enumerate(keep):
            f.write(f"{i}\t{meta[k][0]}\t{meta[k][1]}\t{meta[k][2]}\n")
    with open(out_dir / "queries.txt", "w") as f:
        for i, (pkg, syn) in enumerate(qtext):
            f.write(f"{i}\t{pkg}\t{syn}\n")
    src = Counter(meta[k][0] for k in keep)
    nnz = np.diff(docs.indptr)
    release = ""
    rel = sorted((CACHE / f"apt-{SUITE}-i18n" / "lists").glob("*_InRelease"))
    if rel:
        for line in rel[0].read_text(errors="replace").splitlines():
            if line.startswith("Date:"):
                release = line.split(":", 1)[1].strip()
                break
    stats = {
        "name": NAME, "docs": n, "dim": dim, "vocabulary_all_terms": len(vocab),
        "postings": int(docs.nnz), "nnz_per_doc_mean": round(float(nnz.mean()), 2),
        "nnz_per_doc_max": int(nnz.max()), "nnz_per_doc_p50": int(np.median(nnz)),
        "words_per_doc_mean": round(float(np.mean([len(docs_text[k].split()) for k in keep])), 1),
        "tokens_per_doc_mean": round(float(avgdl), 2),
        "queries": queries.shape[0],
        "nnz_per_query_mean": round(float(np.diff(queries.indptr).mean()), 2),
        "nnz_per_query_max": int(np.diff(queries.indptr).max()),
        "bm25": {"k1": K1, "b": B, "idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
                 "doc_weight": "idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))",
                 "query_weight": "term count"},
        "sources": {
            "debian": {"suite": SUITE, "components": list(COMPONENTS), "release_date": release,
                       "packages": len(entries), "distinct_descriptions": n_bodies,
                       "documents": {k: v for k, v in src.items() if k.startswith("debian")},
                       "files": {Path(f).name: hashlib.sha256(Path(f).read_bytes()).hexdigest()
                                 for f in tr_files}},
            "man": {"root": str(MAN_ROOT), "files": len(files), "pages": n_pages,
                    "redirections_or_empty": n_stub, "duplicates": n_dup,
                    "documents": src.get("man", 0)},
        },
        "passage_words_max": MAX_WORDS, "min_tokens": MIN_TOKENS, "seed": SEED,
        "stop_words": len(STOP), "built_seconds": round(time.time() - t0, 1),
        "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    log(f"corpus: written to {out_dir} ({time.time() - t0:.0f} s): {json.dumps({k: stats[k] for k in ('docs', 'dim', 'postings', 'nnz_per_doc_mean', 'nnz_per_query_mean')})}")
    return stats


def ensure(nq=1000, force=False, log=print):
    """The cached collection's directory (built when missing)."""
    d = DATA_CACHE / NAME
    ok = all((d / f).exists() for f in ("docs.npz", "queries.npz", "stats.json"))
    if ok and not force:
        st = json.loads((d / "stats.json").read_text())
        if st.get("queries", 0) >= nq:
            return d
    build(d, nq=max(nq, 1000), log=log)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--force", action="store_true", help="rebuild even when cached")
    a = ap.parse_args()
    print(ensure(a.nq, a.force))


if __name__ == "__main__":
    main()
