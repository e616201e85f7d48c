"""A SPLADE-like synthetic collection for a first gpusparse measurement:
100,000 documents of ~130 distinct terms drawn Zipf-like (p ~ 1 / (rank + 10))
from a 30,522-term vocabulary, gamma-distributed weights; 200 queries of ~32
terms.  Writes docs.txt and queries.txt (id TAB spvec literal) for COPY.
Usage: python3 gen_synthetic.py [ndocs]"""
import sys

import numpy as np
rng = np.random.default_rng(7)
V = 30522
def zipf_terms(n, nnz):
    # Zipf-like term popularity: rank r with p ~ 1/(r+10)
    p = 1.0 / (np.arange(V) + 10.0); p /= p.sum()
    perm = rng.permutation(V)
    out = []
    for _ in range(n):
        t = np.unique(perm[rng.choice(V, size=nnz, p=p)])
        w = rng.gamma(2.0, 0.5, size=t.size).astype(np.float32)
        out.append((t, w))
    return out
def lit(t, w):
    return "{" + ",".join(f"{i+1}:{x:.4g}" for i, x in zip(t, w)) + f"}}/{V}"
with open("docs.txt", "w") as f:
    for i, (t, w) in enumerate(zipf_terms(int(sys.argv[1]) if len(sys.argv) > 1 else 100000, 140)):
        f.write(f"{i}\t{lit(t, w)}\n")
with open("queries.txt", "w") as f:
    for i, (t, w) in enumerate(zipf_terms(200, 32)):
        f.write(f"{i}\t{lit(t, w)}\n")
