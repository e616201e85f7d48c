#!/usr/bin/env python3
"""The table of bench/store/pq-bits.sh: per (metric, probes, mode) the median search time
of an older module's 8-bit codes, this module's 8-bit and 4-bit codes, their ratios and
the code-bytes floor, plus the memory lines bench_pq prints.

    pq-bits-table.py BENCH_PQ_LOG OUTDIR [STEM]   writes OUTDIR/STEM.md, .csv, .png

The PNG needs matplotlib (skipped without it)."""
import collections
import csv
import os
import re
import statistics
import sys

HEAD = re.compile(r"## (\w+) module, (\d)-bit, (\w+) probes (\d+) round (\d+)")


def parse(path):
    times, floors, memory = collections.defaultdict(list), {}, []
    cur = None
    for line in open(path):
        m = HEAD.match(line)
        if m:
            cur = (m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))
        elif line.startswith("memory") and line.strip() not in memory:
            memory.append(line.strip())
        elif line.startswith("| ") and not line.startswith("| mode") and cur:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            times[cur + (c[0],)].append(float(c[-3]))
            floors[(cur[1], cur[2], cur[3])] = float(c[-1])
    return times, floors, memory


def main():
    log, outdir = sys.argv[1], sys.argv[2]
    stem = sys.argv[3] if len(sys.argv) > 3 else "pq-bits"
    times, floors, memory = parse(log)
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for metric, probes, mode in sorted({(k[2], k[3], k[4]) for k in med},
                                       key=lambda t: (t[0], t[1], ["lut", "juno", "hits"].index(t[2]))):
        o = med.get(("old", 8, metric, probes, mode))
        n8 = med.get(("new", 8, metric, probes, mode))
        n4 = med.get(("new", 4, metric, probes, mode))
        rows.append({"metric": metric, "probes": probes, "mode": mode,
                     "old_8bit_ms": o, "new_8bit_ms": n8, "new_4bit_ms": n4,
                     "new8_vs_old": n8 / o if o and n8 else None,
                     "bit4_speedup_vs_new8": n8 / n4 if n4 and n8 else None,
                     "floor_8bit_ms": floors.get((8, metric, probes)),
                     "floor_4bit_ms": floors.get((4, metric, probes)),
                     "runs": len(times.get(("new", 8, metric, probes, mode), []))})
    cols = list(rows[0])
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, stem + ".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({c: (f"{v:.4g}" if isinstance(v, float) else v) for c, v in r.items()})
    fmt = lambda v: "" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["# IVF-PQ search alone: 8-bit against 4-bit codes, and the older module", "",
             f"From `{os.path.basename(log)}` (bench/store/pq-bits.sh): 450,000 x 128 rows, 64 "
             "sub-spaces, 700 lists, 1,000 queries, k 10; each figure the median over rounds "
             "of bench_pq's median of 7; floor: the probed lists' code bytes and keys once a "
             "query at the measured device bandwidth.", ""]
    lines += [f"- {m}" for m in memory] + [""]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    png = stem + ".png"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(11, 4.5))
        labels = [f"{r['metric']} p{r['probes']}\n{r['mode']}" for r in rows]
        x = range(len(rows))
        for i, (key, name) in enumerate([("old_8bit_ms", "older module, 8-bit"),
                                         ("new_8bit_ms", "this module, 8-bit"),
                                         ("new_4bit_ms", "this module, 4-bit")]):
            ax.bar([j + (i - 1) * 0.27 for j in x], [r[key] or 0 for r in rows], 0.27, label=name)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("ms for 1,000 queries")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, png), dpi=110)
        lines += ["", f"![{png}]({png})"]
    except ImportError:
        pass
    lines += ["", f"CSV: [{stem}.csv]({stem}.csv)", ""]
    with open(os.path.join(outdir, stem + ".md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
